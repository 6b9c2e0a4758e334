package nccl

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
)

// SSHKey is a throwaway key pair for one test run: the launcher uses it to
// start ranks on the workers. It lives only in the run's Secret.
type SSHKey struct {
	// PrivatePEM is the SEC 1 PEM private key OpenSSH reads.
	PrivatePEM []byte
	// AuthorizedKey is the public key in authorized_keys format.
	AuthorizedKey []byte
}

// NewSSHKey makes an ECDSA P-256 key pair from rand (crypto/rand when nil).
func NewSSHKey(r io.Reader) (*SSHKey, error) {
	if r == nil {
		r = rand.Reader
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), r)
	if err != nil {
		return nil, fmt.Errorf("generating SSH key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encoding SSH key: %w", err)
	}
	pub, err := k.PublicKey.Bytes()
	if err != nil {
		return nil, fmt.Errorf("encoding SSH public key: %w", err)
	}
	// RFC 5656 section 3.1: string "ecdsa-sha2-nistp256", string
	// "nistp256", string Q (uncompressed point).
	var blob []byte
	for _, part := range [][]byte{[]byte("ecdsa-sha2-nistp256"), []byte("nistp256"), pub} {
		blob = binary.BigEndian.AppendUint32(blob, uint32(len(part)))
		blob = append(blob, part...)
	}
	return &SSHKey{
		PrivatePEM:    pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
		AuthorizedKey: []byte("ecdsa-sha2-nistp256 " + base64.StdEncoding.EncodeToString(blob) + " gpu-validate\n"),
	}, nil
}
