package nccl

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// BaselineConfigMap is the ConfigMap that holds one baseline per pool.
const BaselineConfigMap = "gpu-validate-nccl-baselines"

// Baseline is the bus bandwidth a pool reached when it was known good.
type Baseline struct {
	Pool string `json:"pool"`
	// BusBW is in GB/s, at SizeBytes.
	BusBW       float64   `json:"busBwGBps"`
	SizeBytes   int64     `json:"sizeBytes"`
	Nodes       int       `json:"nodes"`
	GPUsPerNode int       `json:"gpusPerNode"`
	Fabric      string    `json:"fabric,omitempty"`
	Launcher    string    `json:"launcher,omitempty"`
	Image       string    `json:"image,omitempty"`
	RecordedAt  time.Time `json:"recordedAt"`
	// RecordedOn lists the nodes of the run that set the baseline.
	RecordedOn []string `json:"recordedOn,omitempty"`
}

// BaselineStore reads and writes baselines in a ConfigMap.
type BaselineStore struct {
	Client    kubernetes.Interface
	Namespace string
	// Name defaults to BaselineConfigMap.
	Name string
}

func (s BaselineStore) name() string {
	if s.Name != "" {
		return s.Name
	}
	return BaselineConfigMap
}

var keyChars = regexp.MustCompile(`[^-._a-zA-Z0-9]+`)

// BaselineKey is the ConfigMap key of a pool (pool names are sanitised to
// the characters ConfigMap keys allow).
func BaselineKey(pool string) string {
	k := keyChars.ReplaceAllString(pool, "_")
	if k == "" || k == "." || k == ".." {
		k = "_default"
	}
	if len(k) > 240 {
		k = k[:240]
	}
	return k + ".json"
}

// Get returns the pool's baseline, or nil when none is stored.
func (s BaselineStore) Get(ctx context.Context, pool string) (*Baseline, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.name(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", s.Namespace, s.name(), err)
	}
	raw, ok := cm.Data[BaselineKey(pool)]
	if !ok {
		return nil, nil
	}
	b := &Baseline{}
	if err := json.Unmarshal([]byte(raw), b); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", s.Namespace, s.name(), BaselineKey(pool), err)
	}
	return b, nil
}

// Save stores the pool's baseline, creating the ConfigMap when needed.
func (s BaselineStore) Save(ctx context.Context, b Baseline) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	key := BaselineKey(b.Pool)
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	for attempt := 0; attempt < 5; attempt++ {
		cm, err := cms.Get(ctx, s.name(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: s.name(), Namespace: s.Namespace,
					Labels: map[string]string{"app.kubernetes.io/managed-by": "kubectl-gpu_validate"}},
				Data: map[string]string{key: string(data)},
			}
			if _, err = cms.Create(ctx, cm, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				continue
			}
			return wrapSave(s, err)
		}
		if err != nil {
			return wrapSave(s, err)
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[key] = string(data)
		if _, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
			continue
		}
		return wrapSave(s, err)
	}
	return fmt.Errorf("saving baseline in ConfigMap %s/%s: too many conflicts", s.Namespace, s.name())
}

func wrapSave(s BaselineStore, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("saving baseline in ConfigMap %s/%s: %w", s.Namespace, s.name(), err)
}

// Summary is one line about a baseline, for reports.
func (b *Baseline) Summary() string {
	if b == nil {
		return "none"
	}
	parts := []string{fmt.Sprintf("%.1f GB/s at %s", b.BusBW, FormatBytes(b.SizeBytes))}
	if b.Nodes > 0 {
		parts = append(parts, fmt.Sprintf("%d nodes", b.Nodes))
	}
	if !b.RecordedAt.IsZero() {
		parts = append(parts, "recorded "+b.RecordedAt.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, ", ")
}
