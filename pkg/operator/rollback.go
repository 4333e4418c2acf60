package operator

import (
	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// rolledOutBefore reports whether target, as loaded and trusted this
// reconcile (status.strategy), is a strategy the Installation rolled out
// before: an entry of status.history — the operator's own record, written
// only after a rollout finished — of the same identity and the same digest
// (for a Helm source, or the same chart and values digest: a chart that
// renders .Release.Revision renders other text at each revision). Returning
// to it is a rollback, as helm rollback returns to an earlier revision.
func rolledOutBefore(in *v1alpha1.Installation, target strategy.Identity) bool {
	st := in.Status.Strategy
	if st == nil || st.Digest == "" {
		return false
	}
	for _, h := range in.Status.History {
		if h.Version != target.Version || h.Registry != target.Registry || h.Identifier != target.Identifier {
			continue
		}
		if h.Digest == st.Digest {
			return true
		}
		if st.Source == v1alpha1.StrategySourceHelm && st.Chart != "" && h.Chart == st.Chart && h.ValuesDigest == st.ValuesDigest {
			return true
		}
	}
	return false
}
