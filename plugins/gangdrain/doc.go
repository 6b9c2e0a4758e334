// Package gangdrain implements `kubectl gang-drain`: drain GPU nodes at a checkpoint boundary, stopping training gangs as a unit.
package gangdrain
