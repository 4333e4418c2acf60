package operator

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
)

// crdRefusal stands for a refusal of another package (the CRD
// upgrade-safety preflight): it only implements Refusal.
type crdRefusal struct{ reason string }

func (e *crdRefusal) Error() string         { return "crd widgets.example.com: scope changed" }
func (e *crdRefusal) RefusalReason() string { return e.reason }

func TestRefusalIsFoundThroughWrapping(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		reason string
	}{
		{"invalid spec", &InvalidSpecError{Err: errors.New("customize patch 0: missing path")}, v1alpha1.ReasonInvalidSpec},
		{"invalid spec, wrapped", fmt.Errorf("customise strategy x: %w", &InvalidSpecError{Err: errors.New("bad")}), v1alpha1.ReasonInvalidSpec},
		{"another package's CRD refusal, wrapped twice", fmt.Errorf("rollout: %w", fmt.Errorf("preflight: %w", &crdRefusal{v1alpha1.ReasonCRDChangeRefused})), v1alpha1.ReasonCRDChangeRefused},
		// The preflight's own refusal (pkg/crdsafety knows no
		// Installation), as engine.Run returns it and wrapped.
		{"the CRD preflight's refusal", &crdsafety.UnsafeError{Findings: []crdsafety.Finding{{CRD: "things.example.com", Rule: crdsafety.RuleScope}}}, v1alpha1.ReasonCRDChangeRefused},
		{"the CRD preflight's refusal, wrapped", fmt.Errorf("rollout v2: %w", &crdsafety.UnsafeError{}), v1alpha1.ReasonCRDChangeRefused},
		{"joined", errors.Join(errors.New("other"), &crdRefusal{v1alpha1.ReasonCRDChangeRefused}), v1alpha1.ReasonCRDChangeRefused},
		// A reason that does not stall is not a refusal: the error is
		// retried as any other.
		{"reason not in StalledReasons", &crdRefusal{v1alpha1.ReasonApplyFailed}, ""},
		{"plain error", errors.New("connection refused"), ""},
		{"nil", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, ok := asRefusal(c.err)
			if ok != (c.reason != "") || isRefusal(c.err) != ok {
				t.Fatalf("asRefusal ok = %v, want %v", ok, c.reason != "")
			}
			if ok && r.RefusalReason() != c.reason {
				t.Errorf("reason %s, want %s", r.RefusalReason(), c.reason)
			}
			if ok && !strings.Contains(c.err.Error(), r.Error()) {
				t.Errorf("message %q, not the error's %q", r.Error(), c.err.Error())
			}
		})
	}
	if err := (&InvalidSpecError{Err: errors.New("x")}); !errors.Is(err, err.Err) {
		t.Error("InvalidSpecError does not unwrap")
	}
}
