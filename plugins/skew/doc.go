// Package skew implements `kubectl skew`: check component versions against the Kubernetes version-skew policy and plan upgrades.
package skew
