package operator

import (
	"errors"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
)

// Refusal is an error by which the operator refuses the target strategy,
// or a step of it, before writing anything of it: an invalid spec, a
// CustomResourceDefinition change the upgrade-safety preflight refuses.
// Any package may return one (errors.As finds it through %w wrapping);
// the operator records RefusalReason as the Degraded condition's reason,
// keeps what runs as it is, does not retry before the next resync (or a
// change of the Installation), and the Installation is Stalled (kstatus
// Failed): a refusal's reason must be one of v1alpha1.StalledReasons.
type Refusal interface {
	error
	// RefusalReason is a Reason* constant of api/v1alpha1 listed in
	// v1alpha1.StalledReasons, e.g. v1alpha1.ReasonCRDChangeRefused.
	RefusalReason() string
}

// asRefusal returns the Refusal in err's chain whose reason stalls the
// Installation, if any.
func asRefusal(err error) (Refusal, bool) {
	var r Refusal
	if errors.As(err, &r) && v1alpha1.IsStalledReason(r.RefusalReason()) {
		return r, true
	}
	var unsafe *crdsafety.UnsafeError
	if errors.As(err, &unsafe) {
		return crdChangeRefused{err}, true
	}
	return nil, false
}

// crdChangeRefused is the CRD upgrade-safety preflight's refusal
// (pkg/crdsafety, which knows no Installation): reason CRDChangeRefused.
type crdChangeRefused struct{ error }

// RefusalReason is v1alpha1.ReasonCRDChangeRefused.
func (crdChangeRefused) RefusalReason() string { return v1alpha1.ReasonCRDChangeRefused }

// InvalidSpecError is a spec that cannot be turned into the strategy it
// asks for (a customizeComponents patch that does not apply, a placement
// that cannot be put on the pods): a Refusal with reason InvalidSpec.
type InvalidSpecError struct {
	Err error
}

func (e *InvalidSpecError) Error() string { return "invalid spec: " + e.Err.Error() }
func (e *InvalidSpecError) Unwrap() error { return e.Err }

// RefusalReason is v1alpha1.ReasonInvalidSpec.
func (e *InvalidSpecError) RefusalReason() string { return v1alpha1.ReasonInvalidSpec }

func isRefusal(err error) bool {
	_, ok := asRefusal(err)
	return ok
}
