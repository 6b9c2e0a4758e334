package nccl

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ResolveImage pins an image reference to its digest
// (registry/repo@sha256:...), so every node of a wave runs the same bits
// even when the tag moves. A reference that already names a digest is
// returned unchanged. Credentials come from the default keychain (docker
// config, credential helpers) unless opts override them.
func ResolveImage(ctx context.Context, ref string, opts ...remote.Option) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("invalid image reference %q: %w", ref, err)
	}
	if d, ok := r.(name.Digest); ok {
		return d.String(), nil
	}
	o := append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	desc, err := remote.Head(r, o...)
	if err != nil {
		return "", fmt.Errorf("resolving image %s to a digest: %w", ref, err)
	}
	return r.Context().Digest(desc.Digest.String()).String(), nil
}
