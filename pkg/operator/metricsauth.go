package operator

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Bounds of MetricsAuthFilter. A decision is kept at most as long as
// controller-runtime's filters keep theirs (an authenticated token one
// minute, a denial 30 s), and at most metricsAuthCacheSize of them; a
// review of the API server may take metricsAuthReviewTimeout.
const (
	metricsAuthAllowTTL      = time.Minute
	metricsAuthDenyTTL       = 30 * time.Second
	metricsAuthCacheSize     = 1024
	metricsAuthReviewTimeout = 10 * time.Second
)

// MetricsAuthFilter is a metricsserver.Options.FilterProvider (with
// SecureServing) that lets a request through only when the API server
// authenticates its bearer token (a TokenReview) and authorizes that user
// for the request's verb on its non-resource path (a SubjectAccessReview:
// "get /metrics", the installstrategy-metrics-reader ClusterRole). It
// answers 401 without a token or with one the API server does not
// authenticate, 403 without the permission, 500 when the API server
// cannot say (not cached). The operator's ServiceAccount needs create on
// tokenreviews and subjectaccessreviews.
//
// It makes the same two reviews as controller-runtime's
// filters.WithAuthenticationAndAuthorization, which kubebuilder
// scaffolds, with client-go alone: that filter links k8s.io/apiserver's
// webhook authenticator and authorizer, and with them CEL, gRPC,
// OpenTelemetry and text/template (the operator's binary 38 -> 66 MB, its
// RSS at start 33 -> 55 MB; docs/NOTES.md, "Metrics behind the API
// server's authentication").
func MetricsAuthFilter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	kube, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return newMetricsAuth(kube).filter, nil
}

func newMetricsAuth(kube kubernetes.Interface) *metricsAuth {
	return &metricsAuth{kube: kube, cache: map[[sha256.Size]byte]metricsDecision{}, now: time.Now}
}

type metricsDecision struct {
	code    int
	expires time.Time
}

type metricsAuth struct {
	kube  kubernetes.Interface
	now   func() time.Time
	mu    sync.Mutex
	cache map[[sha256.Size]byte]metricsDecision
}

func (a *metricsAuth) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := a.decide(r)
		if code != http.StatusOK {
			log.V(4).Info("metrics request refused", "path", r.URL.Path, "status", code)
			http.Error(w, http.StatusText(code), code)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}

// bearerToken is the token of an "Authorization: Bearer TOKEN" header
// (the scheme in any case, as k8s.io/apiserver's bearertoken reads it).
func bearerToken(r *http.Request) string {
	parts := strings.Fields(r.Header.Get("Authorization"))
	if len(parts) != 2 || !strings.EqualFold(parts[0], "bearer") {
		return ""
	}
	return parts[1]
}

// decide returns 200, 401, 403 or 500 for a request.
func (a *metricsAuth) decide(r *http.Request) int {
	token := bearerToken(r)
	if token == "" {
		return http.StatusUnauthorized
	}
	verb := strings.ToLower(r.Method)
	// The token itself is not kept, only its hash with what was asked.
	key := sha256.Sum256([]byte(verb + "\x00" + r.URL.Path + "\x00" + token))
	now := a.now()
	a.mu.Lock()
	d, ok := a.cache[key]
	a.mu.Unlock()
	if ok && now.Before(d.expires) {
		return d.code
	}
	code := a.review(r.Context(), token, verb, r.URL.Path)
	if code == http.StatusInternalServerError {
		return code
	}
	ttl := metricsAuthDenyTTL
	if code == http.StatusOK {
		ttl = metricsAuthAllowTTL
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= metricsAuthCacheSize {
		for k, d := range a.cache {
			if !now.Before(d.expires) {
				delete(a.cache, k)
			}
		}
		// Full of live decisions (many tokens): start over rather than
		// grow; each costs one review more.
		if len(a.cache) >= metricsAuthCacheSize {
			clear(a.cache)
		}
	}
	a.cache[key] = metricsDecision{code: code, expires: now.Add(ttl)}
	return code
}

// review asks the API server who token is and whether they may verb path.
func (a *metricsAuth) review(ctx context.Context, token, verb, path string) int {
	ctx, cancel := context.WithTimeout(ctx, metricsAuthReviewTimeout)
	defer cancel()
	tr, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return http.StatusInternalServerError
	}
	if !tr.Status.Authenticated || tr.Status.User.Username == "" {
		return http.StatusUnauthorized
	}
	u := tr.Status.User
	var extra map[string]authorizationv1.ExtraValue
	for k, v := range u.Extra {
		if extra == nil {
			extra = map[string]authorizationv1.ExtraValue{}
		}
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return http.StatusInternalServerError
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return http.StatusForbidden
	}
	return http.StatusOK
}
