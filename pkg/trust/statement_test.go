package trust_test

import (
	"errors"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

func TestStatementCheck(t *testing.T) {
	st := trust.Statement{Product: "kubevirt", Version: "v1.8.4", Digest: "sha256:aa"}
	for _, tc := range []struct {
		name string
		e    trust.Expect
		want error
	}{
		{"nothing asked", trust.Expect{}, nil},
		{"same product and version", trust.Expect{Product: "kubevirt", Version: "v1.8.4", Digest: "sha256:aa"}, nil},
		{"another product", trust.Expect{Product: "cdi"}, trust.ErrIdentityMismatch},
		{"another version", trust.Expect{Version: "v1.9.0"}, trust.ErrIdentityMismatch},
		{"another text", trust.Expect{Digest: "sha256:bb"}, trust.ErrIdentityMismatch},
		{"upgrade", trust.Expect{Deployed: "v1.7.0"}, nil},
		{"same version", trust.Expect{Deployed: "v1.8.4"}, nil},
		{"downgrade", trust.Expect{Deployed: "v1.9.0"}, trust.ErrDowngrade},
		{"downgrade allowed", trust.Expect{Deployed: "v1.9.0", AllowDowngrade: true}, nil},
		{"downgrade named by version", trust.Expect{Deployed: "v1.9.0", Version: "v1.8.4"}, nil},
		{"pre-release after its release", trust.Expect{Deployed: "v1.8.4-rc.1"}, nil},
		{"not semantic", trust.Expect{Deployed: "latest"}, nil},
	} {
		err := st.Check(tc.e)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestSignedStatementOnConfigMaps(t *testing.T) {
	key, _ := trust.GenerateKey()
	other, _ := trust.GenerateKey()
	ring := &trust.KeyRing{}
	if err := ring.Add("release", key.Public()); err != nil {
		t.Fatal(err)
	}
	text := []byte("---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n")
	digest := codec.Digest(text)
	sign := func(s *trust.Signer, version string) map[string]string {
		a := map[string]string{metakeys.KubeVirtVersionAnnotation: version, metakeys.KubeVirtIdentifierAnnotation: "id"}
		if err := trust.Sign(a, digest, s); err != nil {
			t.Fatal(err)
		}
		return a
	}
	subject := func(a map[string]string) trust.Subject {
		return trust.Subject{Digest: digest, Signature: a[metakeys.SignatureAnnotation], KeyID: a[metakeys.SignatureKeyAnnotation],
			Statement: a[metakeys.StatementAnnotation], StatementSignature: a[metakeys.StatementSignatureAnnotation]}
	}
	a := sign(key, "v1.9.0")
	st, name, err := trust.VerifyStatement(a[metakeys.StatementAnnotation], a[metakeys.StatementSignatureAnnotation], ring)
	if err != nil || name != "release" || st != (trust.Statement{Version: "v1.9.0", Identifier: "id", Digest: digest}) {
		t.Fatalf("statement %+v by %q, %v", st, name, err)
	}
	p := trust.Policy{Keys: ring, Expect: &trust.Expect{Deployed: "v1.8.4"}}
	if how, err := p.Check(subject(a)); err != nil || how != "signed by release" {
		t.Fatalf("upgrade: %q, %v", how, err)
	}
	var untrusted *trust.UntrustedError
	p.Expect.Deployed = "v2.0.0"
	if _, err := p.Check(subject(a)); !errors.As(err, &untrusted) || !errors.Is(err, trust.ErrDowngrade) {
		t.Errorf("downgrade: %v", err)
	}
	p.Expect.Deployed = ""
	bare := subject(a)
	bare.Statement, bare.StatementSignature = "", ""
	if _, err := p.Check(bare); !errors.Is(err, trust.ErrNoStatement) {
		t.Errorf("no statement: %v", err)
	}
	forged := subject(a)
	forged.StatementSignature = sign(other, "v1.9.0")[metakeys.StatementSignatureAnnotation]
	if _, err := p.Check(forged); !errors.Is(err, trust.ErrUnknownKey) {
		t.Errorf("statement signed by another key: %v", err)
	}
	// Without Expect, the statement is not asked for (the plugin's
	// verify, stored strategies).
	if _, err := (trust.Policy{Keys: ring}).Check(bare); err != nil {
		t.Errorf("no expectation: %v", err)
	}
}
