package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// keyPair is a certificate with its private key, both PEM-encoded.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// certSpec describes a certificate to sign.
type certSpec struct {
	commonName   string
	organization []string
	dnsNames     []string
	ips          []net.IP
	isCA         bool
	usages       []x509.ExtKeyUsage
	validity     time.Duration
	// rsaKey makes an RSA key in PKCS#1 form (cert-controller needs that
	// for the CA it is handed) instead of ECDSA P-256.
	rsaKey bool
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
}

// newKeyPair creates a certificate for spec, signed by parent, or
// self-signed when parent is nil.
func newKeyPair(spec certSpec, parent *keyPair) (*keyPair, error) {
	var key crypto.Signer
	var keyPEM []byte
	if spec.rsaKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		key = k
		keyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	} else {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, err
		}
		key = k
		keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	validity := spec.validity
	if validity == 0 {
		validity = 365 * 24 * time.Hour
	}
	now := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: spec.commonName, Organization: spec.organization},
		NotBefore:             now,
		NotAfter:              now.Add(validity),
		DNSNames:              spec.dnsNames,
		IPAddresses:           spec.ips,
		BasicConstraintsValid: true,
	}
	if spec.isCA {
		tmpl.IsCA = true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		tmpl.ExtKeyUsage = spec.usages
	}
	signerCert, signerKey := tmpl, key
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", spec.commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  keyPEM,
	}, nil
}

// write stores the pair as <dir>/<name>.crt and <dir>/<name>.key and returns
// both paths.
func (k *keyPair) write(dir, name string) (certPath, keyPath string, err error) {
	certPath = filepath.Join(dir, name+".crt")
	keyPath = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certPath, k.CertPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyPath, k.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// pki is the set of credentials one control plane uses.
type pki struct {
	ca      *keyPair
	serving *keyPair
	admin   *keyPair

	caPath, servingCert, servingKey, adminCert, adminKey string
	saKeyPath, saPubPath                                 string
}

var loopbackIPs = []net.IP{net.ParseIP("127.0.0.1")}

// newPKI generates a CA, an apiserver serving certificate for 127.0.0.1 and
// localhost, an admin client certificate in group system:masters and a
// service-account signing key, all written under dir.
func newPKI(dir string) (*pki, error) {
	p := &pki{}
	var err error
	if p.ca, err = newKeyPair(certSpec{commonName: "gpufleet-e2e-ca", isCA: true}, nil); err != nil {
		return nil, err
	}
	if p.serving, err = newKeyPair(certSpec{
		commonName: "kube-apiserver",
		dnsNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		ips:        append([]net.IP{net.ParseIP("10.96.0.1")}, loopbackIPs...),
		usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, p.ca); err != nil {
		return nil, err
	}
	if p.admin, err = newKeyPair(certSpec{
		commonName:   "gpufleet-e2e-admin",
		organization: []string{"system:masters"},
		usages:       []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, p.ca); err != nil {
		return nil, err
	}
	if p.caPath, _, err = p.ca.write(dir, "ca"); err != nil {
		return nil, err
	}
	if p.servingCert, p.servingKey, err = p.serving.write(dir, "apiserver"); err != nil {
		return nil, err
	}
	if p.adminCert, p.adminKey, err = p.admin.write(dir, "admin"); err != nil {
		return nil, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	p.saKeyPath = filepath.Join(dir, "sa.key")
	p.saPubPath = filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(p.saKeyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.saPubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// servingPairFor signs a serving certificate for webhook servers on loopback.
func (p *pki) servingPairFor(name string, dnsNames ...string) (*keyPair, error) {
	return newKeyPair(certSpec{
		commonName: name,
		dnsNames:   append([]string{"localhost"}, dnsNames...),
		ips:        loopbackIPs,
		usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, p.ca)
}

var clientAuth = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}

var serverAuth = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
