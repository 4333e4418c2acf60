package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults the API server applies; the helpers below apply them too, so an
// Installation built in Go without a round trip behaves the same.
const (
	// DefaultCanaryInitialMaxUnavailable is canary.initialMaxUnavailable's
	// default.
	DefaultCanaryInitialMaxUnavailable int32 = 1
	// DefaultCanaryStepPercent is canary.stepPercent's default.
	DefaultCanaryStepPercent int32 = 10
	// DefaultCADuration is certificateRotation.ca.duration's default.
	DefaultCADuration = 168 * time.Hour
	// DefaultCARenewBefore is certificateRotation.ca.renewBefore's default.
	DefaultCARenewBefore = 48 * time.Hour
	// DefaultServerDuration is certificateRotation.server.duration's
	// default.
	DefaultServerDuration = 24 * time.Hour
	// DefaultServerRenewBefore is certificateRotation.server.renewBefore's
	// default.
	DefaultServerRenewBefore = 8 * time.Hour
)

// SetCondition sets the condition of type t with meta.SetStatusCondition,
// stamped with the Installation's generation. The transition time changes
// only when the status does. It reports whether anything changed.
func (in *Installation) SetCondition(t ConditionType, status metav1.ConditionStatus, reason, message string) bool {
	return meta.SetStatusCondition(&in.Status.Conditions, metav1.Condition{
		Type:               string(t),
		Status:             status,
		Reason:             reason,
		Message:            ConditionMessage(message),
		ObservedGeneration: in.Generation,
	})
}

// MaxConditionMessage is the most bytes the API server accepts in a
// condition's message (metav1.Condition's maxLength): a longer one fails
// the whole status write, and the condition saying why is lost.
const MaxConditionMessage = 32768

// ConditionMessage shortens a message to MaxConditionMessage bytes (see
// Truncate).
func ConditionMessage(s string) string { return Truncate(s, MaxConditionMessage) }

// Truncate shortens s to at most max bytes (max above 16), cutting at a
// rune boundary and saying so, for the API server's limits on messages
// (which reject the whole object otherwise).
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const more = " …(truncated)"
	cut := max - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// RemoveCondition removes the condition of type t and reports whether it
// was there.
func (in *Installation) RemoveCondition(t ConditionType) bool {
	return meta.RemoveStatusCondition(&in.Status.Conditions, string(t))
}

// Condition returns the condition of type t, or nil.
func (in *Installation) Condition(t ConditionType) *metav1.Condition {
	return meta.FindStatusCondition(in.Status.Conditions, string(t))
}

// IsConditionTrue reports whether the condition of type t is True.
func (in *Installation) IsConditionTrue(t ConditionType) bool {
	return meta.IsStatusConditionTrue(in.Status.Conditions, string(t))
}

// IsDeployed reports whether the current spec is fully deployed: phase
// Deployed, the status describes the current generation, and the observed
// strategy is the target one.
func (in *Installation) IsDeployed() bool {
	return in.Status.Phase == PhaseDeployed &&
		in.Status.ObservedGeneration == in.Generation &&
		!in.IsUpdating()
}

// IsUpdating reports whether a deployed strategy is being replaced by
// another: there is an observed identifier and it is not the target's.
func (in *Installation) IsUpdating() bool {
	return in.Status.ObservedIdentifier != "" && in.Status.TargetIdentifier != "" &&
		in.Status.ObservedIdentifier != in.Status.TargetIdentifier
}

// IsDeleting reports whether the Installation is being deleted.
func (in *Installation) IsDeleting() bool {
	return in.DeletionTimestamp != nil
}

// IsActive reports whether the Installation manages (or is about to
// manage) its product: it is neither Deleted nor being deleted. Of several
// Installations of one product in the cluster only one may be active.
func (in *Installation) IsActive() bool {
	return in.Status.Phase != PhaseDeleted && !in.IsDeleting()
}

// StrategySourceType returns the type of the strategy source, Product when
// none is set.
func (s *InstallationSpec) StrategySourceType() StrategySourceType {
	switch {
	case s.Strategy == nil:
		return StrategySourceProduct
	case s.Strategy.Image != "":
		return StrategySourceImage
	case s.Strategy.ConfigMap != nil:
		return StrategySourceConfigMap
	case s.Strategy.OCI != nil:
		return StrategySourceOCI
	case s.Strategy.Helm != nil:
		return StrategySourceHelm
	default:
		return StrategySourceProduct
	}
}

// CanaryOrDefault returns the canary settings with defaults filled in.
func (s *InstallationSpec) CanaryOrDefault() CanarySpec {
	c := CanarySpec{InitialMaxUnavailable: DefaultCanaryInitialMaxUnavailable, StepPercent: DefaultCanaryStepPercent}
	if s.Canary != nil {
		if s.Canary.InitialMaxUnavailable > 0 {
			c.InitialMaxUnavailable = s.Canary.InitialMaxUnavailable
		}
		if s.Canary.StepPercent > 0 {
			c.StepPercent = s.Canary.StepPercent
		}
	}
	return c
}

// UninstallStrategyOrDefault returns the uninstall strategy,
// BlockUninstallIfWorkloadsExist when none is set.
func (s *InstallationSpec) UninstallStrategyOrDefault() UninstallStrategy {
	if s.UninstallStrategy == "" {
		return UninstallBlockIfWorkloadsExist
	}
	return s.UninstallStrategy
}

// CertificateLifetime is the effective lifetime of one kind of
// certificate.
type CertificateLifetime struct {
	// Duration is how long a new certificate is valid.
	Duration time.Duration
	// RenewBefore is how long before expiry it is renewed.
	RenewBefore time.Duration
}

// CertificateLifetimes returns the effective CA and serving certificate
// lifetimes: the spec's values, the defaults where the spec has none, and
// a fifth of the duration where only the duration is set.
func (s *InstallationSpec) CertificateLifetimes() (ca, server CertificateLifetime) {
	var caCfg, serverCfg *CertificateConfig
	if s.CertificateRotation != nil {
		caCfg, serverCfg = s.CertificateRotation.CA, s.CertificateRotation.Server
	}
	return lifetime(caCfg, DefaultCADuration, DefaultCARenewBefore),
		lifetime(serverCfg, DefaultServerDuration, DefaultServerRenewBefore)
}

func lifetime(c *CertificateConfig, defDuration, defRenew time.Duration) CertificateLifetime {
	if c == nil || c.Duration == nil || c.Duration.Duration <= 0 {
		l := CertificateLifetime{Duration: defDuration, RenewBefore: defRenew}
		if c != nil && c.RenewBefore != nil && c.RenewBefore.Duration > 0 && c.RenewBefore.Duration < defDuration {
			l.RenewBefore = c.RenewBefore.Duration
		}
		return l
	}
	l := CertificateLifetime{Duration: c.Duration.Duration, RenewBefore: c.Duration.Duration / 5}
	if c.RenewBefore != nil && c.RenewBefore.Duration > 0 && c.RenewBefore.Duration < c.Duration.Duration {
		l.RenewBefore = c.RenewBefore.Duration
	}
	return l
}

// Identifier returns a digest of the patches, in order, for the strategy's
// identity (the controller records it as an additional property of the
// deployment configuration): "" when there are none, else the lowercase
// hex SHA-256 of their JSON. Reordering patches changes it, since patches
// are applied in order.
func (c *CustomizeComponents) Identifier() string {
	if c == nil || len(c.Patches) == 0 {
		return ""
	}
	b, err := json.Marshal(c.Patches)
	if err != nil {
		// Marshalling a slice of structs of strings cannot fail.
		panic("v1alpha1: marshal patches: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// DefaultHistoryLimit is the number of revisions status.history keeps when
// spec.historyLimit is 0.
const DefaultHistoryLimit = 5

// HistoryLimitOrDefault is spec.historyLimit, or DefaultHistoryLimit.
func (s *InstallationSpec) HistoryLimitOrDefault() int {
	if s.HistoryLimit > 0 {
		return int(s.HistoryLimit)
	}
	return DefaultHistoryLimit
}

// RecordRevision puts a rolled-out strategy at the head of status.history
// (revision numbers count up) and keeps the newest HistoryLimitOrDefault;
// it reports whether the history changed. The same strategy as the newest
// revision (identity and digest) adds nothing.
func (in *Installation) RecordRevision(r StrategyRevision) bool {
	h := in.Status.History
	if len(h) > 0 {
		cur := h[0]
		if cur.Version == r.Version && cur.Registry == r.Registry && cur.Identifier == r.Identifier && cur.Digest == r.Digest {
			return false
		}
		r.Revision = cur.Revision + 1
	} else {
		r.Revision = 1
	}
	h = append([]StrategyRevision{r}, h...)
	if limit := in.Spec.HistoryLimitOrDefault(); len(h) > limit {
		h = h[:limit]
	}
	in.Status.History = h
	return true
}
