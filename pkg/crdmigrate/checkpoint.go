package crdmigrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DefaultCheckpointNamespace is where checkpoints live unless told
// otherwise. The checkpoint decides which objects a resumed run skips, so
// whoever can write it could make a run skip objects and then trim
// storedVersions over objects still stored at an old version. kube-system
// exists on every cluster and only administrators write to it, the same
// people who may update CRD status. A ConfigMap is used rather than
// annotations on the CRD because writing the CRD once per page would wake
// every watcher of CRDs (each apiserver's CRD handler, OpenAPI and
// discovery controllers, operators) for nothing.
const DefaultCheckpointNamespace = "kube-system"

// Checkpoint phases.
const (
	// PhaseMigrating: pages are being rewritten; Continue is the next page.
	PhaseMigrating = "Migrating"
	// PhaseRewritten: every object succeeded; storedVersions is next.
	PhaseRewritten = "Rewritten"
)

// Labels on checkpoint ConfigMaps.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "kubectl-crd-migrate"
	checkpointKey  = "checkpoint.json"
	// AnnotationCRD names the CRD a checkpoint belongs to.
	AnnotationCRD = "gpufleet.dev/crd"
)

// Checkpoint is the resumable state of a client-side run, kept in a
// ConfigMap (data["checkpoint.json"]) named by CheckpointName.
type Checkpoint struct {
	CRD            string `json:"crd"`
	CRDUID         string `json:"crdUID"`
	CRDGeneration  int64  `json:"crdGeneration"`
	StorageVersion string `json:"storageVersion"`
	RunID          string `json:"runID"`
	Phase          string `json:"phase"`
	// Continue is the list continue token of the first page not yet done;
	// empty with PhaseMigrating means the list starts over.
	Continue string `json:"continue,omitempty"`
	// Total is the object count when the current list started.
	Total     int64 `json:"total"`
	Processed int64 `json:"processed"`
	Rewritten int64 `json:"rewritten"`
	Unchanged int64 `json:"unchanged"`
	Conflicts int64 `json:"conflicts"`
	Gone      int64 `json:"gone"`
	Pages     int64 `json:"pages"`
	// Restarts counts lists started over after an expired continue token.
	Restarts  int         `json:"restarts"`
	StartedAt metav1.Time `json:"startedAt"`
	UpdatedAt metav1.Time `json:"updatedAt"`

	resourceVersion string
}

// Matches reports whether the checkpoint belongs to this CRD object and its
// storage version; anything else means starting over. The generation is
// not compared: controllers that inject CA bundles into the conversion
// webhook bump it without changing what is stored, and a run checks the
// storage version after every page instead.
func (c *Checkpoint) Matches(uid string, storageVersion string) bool {
	return c != nil && c.CRDUID == uid && c.StorageVersion == storageVersion
}

// ErrConcurrentRun means another run updated the checkpoint in between.
var ErrConcurrentRun = errors.New("the checkpoint was changed by another run of crd-migrate")

// CheckpointStore keeps checkpoints as ConfigMaps in one namespace.
type CheckpointStore struct {
	Client    kubernetes.Interface
	Namespace string
	// Now returns the time stamped on saves; nil means time.Now.
	Now func() time.Time
}

// CheckpointName is the ConfigMap name for a CRD's checkpoint.
func CheckpointName(crd string) string {
	name := "crd-migrate." + crd
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(crd))
	return name[:240] + "-" + hex.EncodeToString(sum[:])[:12]
}

func (s *CheckpointStore) namespace() string {
	if s.Namespace == "" {
		return DefaultCheckpointNamespace
	}
	return s.Namespace
}

// Where names the ConfigMap holding a CRD's checkpoint, for messages.
func (s *CheckpointStore) Where(crd string) string {
	return fmt.Sprintf("configmap %s/%s", s.namespace(), CheckpointName(crd))
}

// Load returns the CRD's checkpoint, or nil when there is none.
func (s *CheckpointStore) Load(ctx context.Context, crd string) (*Checkpoint, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(s.namespace()).Get(ctx, CheckpointName(crd), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint %s: %w", s.Where(crd), err)
	}
	cp, ok := decodeCheckpoint(crd, cm.Data[checkpointKey])
	if !ok {
		// Unreadable, foreign or inconsistent: keep its version so Save
		// replaces it, and start over (objects already done are no-op
		// writes), rather than trust counts or a phase that do not add up.
		return &Checkpoint{CRD: crd, resourceVersion: cm.ResourceVersion}, nil
	}
	cp.resourceVersion = cm.ResourceVersion
	return cp, nil
}

// decodeCheckpoint reads the checkpoint of crd from the ConfigMap's data.
// Anyone who can write the ConfigMap controls what a resumed run skips, so
// a checkpoint is used only when it is whole: it names this CRD, its phase
// is one this code writes, and its counters add up the way a run keeps
// them (the outcomes sum to Processed, Processed never passes Total, and a
// Rewritten checkpoint has processed everything it counted).
func decodeCheckpoint(crd, data string) (*Checkpoint, bool) {
	cp := &Checkpoint{}
	if err := json.Unmarshal([]byte(data), cp); err != nil || cp.CRD != crd {
		return nil, false
	}
	if cp.Phase != PhaseMigrating && cp.Phase != PhaseRewritten {
		return nil, false
	}
	counts := []int64{cp.Total, cp.Processed, cp.Rewritten, cp.Unchanged, cp.Conflicts, cp.Gone, cp.Pages, int64(cp.Restarts)}
	for _, n := range counts {
		if n < 0 || n > maxCount {
			return nil, false
		}
	}
	if cp.Rewritten+cp.Unchanged+cp.Conflicts+cp.Gone != cp.Processed || cp.Processed > cp.Total {
		return nil, false
	}
	if cp.Phase == PhaseRewritten && (cp.Processed != cp.Total || cp.Continue != "") {
		return nil, false
	}
	if cp.Restarts > maxRestarts {
		return nil, false
	}
	return cp, true
}

// maxCount bounds every counter of a checkpoint: far more objects than one
// resource can hold in etcd, and small enough that sums cannot overflow.
const maxCount = 1 << 40

// Save creates or updates the checkpoint with optimistic concurrency: a
// concurrent writer gives ErrConcurrentRun.
func (s *CheckpointStore) Save(ctx context.Context, cp *Checkpoint) error {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	cp.UpdatedAt = metav1.NewTime(now().UTC().Truncate(time.Second))
	body, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            CheckpointName(cp.CRD),
			Namespace:       s.namespace(),
			Labels:          map[string]string{LabelManagedBy: ManagedBy},
			Annotations:     map[string]string{AnnotationCRD: cp.CRD},
			ResourceVersion: cp.resourceVersion,
		},
		Data: map[string]string{checkpointKey: string(body)},
	}
	var out *corev1.ConfigMap
	if cp.resourceVersion == "" {
		out, err = s.Client.CoreV1().ConfigMaps(s.namespace()).Create(ctx, cm, metav1.CreateOptions{FieldManager: ManagedBy})
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("saving checkpoint %s: %w", s.Where(cp.CRD), ErrConcurrentRun)
		}
	} else {
		out, err = s.Client.CoreV1().ConfigMaps(s.namespace()).Update(ctx, cm, metav1.UpdateOptions{FieldManager: ManagedBy})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return fmt.Errorf("saving checkpoint %s: %w", s.Where(cp.CRD), ErrConcurrentRun)
		}
	}
	if err != nil {
		return fmt.Errorf("saving checkpoint %s: %w", s.Where(cp.CRD), err)
	}
	cp.resourceVersion = out.ResourceVersion
	return nil
}

// Delete removes the checkpoint; a missing one is fine.
func (s *CheckpointStore) Delete(ctx context.Context, cp *Checkpoint) error {
	opts := metav1.DeleteOptions{}
	if cp.resourceVersion != "" {
		rv := cp.resourceVersion
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: &rv}
	}
	err := s.Client.CoreV1().ConfigMaps(s.namespace()).Delete(ctx, CheckpointName(cp.CRD), opts)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if apierrors.IsConflict(err) {
		return fmt.Errorf("deleting checkpoint %s: %w", s.Where(cp.CRD), ErrConcurrentRun)
	}
	if err != nil {
		return fmt.Errorf("deleting checkpoint %s: %w", s.Where(cp.CRD), err)
	}
	return nil
}
