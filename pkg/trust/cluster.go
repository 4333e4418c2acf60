package trust

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Names and keys of the objects in the operator's namespace that hold its
// keys. Only whoever may write the operator's namespace (cluster
// administrators) can change them.
const (
	// OperatorKeySecret holds the operator's own signing key.
	OperatorKeySecret = "installstrategy-signing-key"
	// PrivateKeyKey is the Secret key of the current private key (PKCS#8
	// PEM, unencrypted: the Secret is the protection).
	PrivateKeyKey = "cosign.key"
	// publicKeyKey is the Secret key of the current public key (PEM).
	publicKeyKey = "cosign.pub"
	// retiredKeysKey is the Secret key of the public keys of earlier
	// signing keys (PEM blocks, oldest first): still trusted, so
	// strategies signed before a rotation stay valid.
	retiredKeysKey = "retired.pub"
	// TrustedKeysConfigMap holds further trusted public keys: every data
	// value is a PEM file of one or more "PUBLIC KEY" blocks, named by its
	// data key.
	TrustedKeysConfigMap = "installstrategy-trusted-keys"
)

// OperatorKey is the operator's signing key and the key ring of its
// current and retired public keys.
type OperatorKey struct {
	Signer *Signer
	// Keys holds the current and the retired public keys.
	Keys *KeyRing
}

// EnsureOperatorKey reads the operator's signing key from the Secret
// OperatorKeySecret in namespace, creating the Secret with a new key when
// there is none — and the namespace, when an operator running outside the
// cluster finds none. Two replicas racing both end with the key that was
// created first.
func EnsureOperatorKey(ctx context.Context, kube kubernetes.Interface, namespace string) (*OperatorKey, error) {
	secrets := kube.CoreV1().Secrets(namespace)
	sec, err := secrets.Get(ctx, OperatorKeySecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s, gerr := GenerateKey()
		if gerr != nil {
			return nil, gerr
		}
		sec, err = secrets.Create(ctx, keySecret(namespace, s, nil), metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
			if _, nerr := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); nerr != nil && !apierrors.IsAlreadyExists(nerr) {
				return nil, fmt.Errorf("operator signing key secret %s/%s: create its namespace: %w", namespace, OperatorKeySecret, nerr)
			}
			sec, err = secrets.Create(ctx, keySecret(namespace, s, nil), metav1.CreateOptions{})
		}
		if apierrors.IsAlreadyExists(err) {
			sec, err = secrets.Get(ctx, OperatorKeySecret, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("operator signing key secret %s/%s: %w", namespace, OperatorKeySecret, err)
	}
	return operatorKeyOf(sec)
}

// RotateOperatorKey replaces the operator's signing key by a new one and
// moves the old public key to retiredKeysKey, so strategies it signed stay
// trusted. Operators read the key when they start: restart them after a
// rotation.
func RotateOperatorKey(ctx context.Context, kube kubernetes.Interface, namespace string) (*OperatorKey, error) {
	secrets := kube.CoreV1().Secrets(namespace)
	sec, err := secrets.Get(ctx, OperatorKeySecret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("rotate operator signing key: secret %s/%s: %w", namespace, OperatorKeySecret, err)
	}
	if _, err := operatorKeyOf(sec); err != nil {
		return nil, fmt.Errorf("rotate operator signing key: %w", err)
	}
	s, err := GenerateKey()
	if err != nil {
		return nil, err
	}
	retired := append(bytes.Clone(sec.Data[retiredKeysKey]), sec.Data[publicKeyKey]...)
	next := keySecret(namespace, s, retired)
	next.ResourceVersion = sec.ResourceVersion
	out, err := secrets.Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("rotate operator signing key: update secret %s/%s: %w", namespace, OperatorKeySecret, err)
	}
	return operatorKeyOf(out)
}

func keySecret(namespace string, s *Signer, retired []byte) *corev1.Secret {
	data := map[string][]byte{PrivateKeyKey: s.PrivatePEM(), publicKeyKey: s.PublicPEM()}
	if len(retired) > 0 {
		data[retiredKeysKey] = retired
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: OperatorKeySecret, Namespace: namespace,
			Labels: map[string]string{metakeys.ManagedByLabel: metakeys.ManagedBy}},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}

// OperatorKeyOf reads the operator's key from its Secret (as
// EnsureOperatorKey returns it), e.g. from a watch event.
func OperatorKeyOf(sec *corev1.Secret) (*OperatorKey, error) { return operatorKeyOf(sec) }

func operatorKeyOf(sec *corev1.Secret) (*OperatorKey, error) {
	where := fmt.Sprintf("operator signing key secret %s/%s", sec.Namespace, sec.Name)
	s, err := ParsePrivateKey(sec.Data[PrivateKeyKey], nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", where, PrivateKeyKey, err)
	}
	ring := &KeyRing{}
	if err := ring.Add("operator key "+s.KeyID(), s.Public()); err != nil {
		return nil, err
	}
	if retired := sec.Data[retiredKeysKey]; len(bytes.TrimSpace(retired)) > 0 {
		keys, err := ParsePublicKeys(retired)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", where, retiredKeysKey, err)
		}
		for _, pub := range keys {
			id, _ := keyID(pub)
			if err := ring.Add("retired operator key "+id, pub); err != nil {
				return nil, err
			}
		}
	}
	return &OperatorKey{Signer: s, Keys: ring}, nil
}

// TrustedKeys reads the key ring of the ConfigMap TrustedKeysConfigMap in
// namespace: every data value is a PEM file of public keys, named
// "<namespace>/<configmap>/<data key>". No ConfigMap is an empty ring.
func TrustedKeys(ctx context.Context, kube kubernetes.Interface, namespace string) (*KeyRing, error) {
	cm, err := kube.CoreV1().ConfigMaps(namespace).Get(ctx, TrustedKeysConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &KeyRing{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trusted keys configmap %s/%s: %w", namespace, TrustedKeysConfigMap, err)
	}
	return TrustedKeysOf(cm)
}

// TrustedKeysOf is the key ring of a trusted keys ConfigMap read
// elsewhere (a cache); nil is the empty ring.
func TrustedKeysOf(cm *corev1.ConfigMap) (*KeyRing, error) {
	ring := &KeyRing{}
	if cm == nil {
		return ring, nil
	}
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		if err := ring.AddPEM(cm.Namespace+"/"+TrustedKeysConfigMap+"/"+k, []byte(cm.Data[k])); err != nil {
			return nil, fmt.Errorf("trusted keys configmap: %w", err)
		}
	}
	return ring, nil
}
