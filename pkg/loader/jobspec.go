package loader

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/podsec"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// controlPlaneTolerations let dump pods run on tainted control-plane nodes.
var controlPlaneTolerations = []corev1.Toleration{
	{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
}

func jobName(identifier string) string {
	return JobNamePrefix + identifier[:min(len(identifier), JobNameIDLength)]
}

// Job returns the dump Job the loader would create for a request: the
// target operator image with DumpFlag, the configuration (with its
// identifier) in identity.EnvVar, restricted pod security, control-plane
// placement (plus the configuration's Infra placement and
// Options.Placement: node selectors and tolerations added, an affinity
// replacing the preferred control-plane one), the request's pull secrets,
// a backoff limit, a deadline and a TTL.
func (l *Loader) Job(req Request, id strategy.Identity) (*batchv1.Job, error) {
	cfg := req.Config.Clone()
	cfg.ID = id.Identifier
	toJSON := cfg.JSON
	if l.opts.Foreign {
		toJSON = cfg.KubeVirtJSON
	}
	cfgJSON, err := toJSON()
	if err != nil {
		return nil, err
	}
	labels := map[string]string{metakeys.ManagedByLabel: metakeys.ManagedBy, metakeys.DumpJobLabel: ""}
	podLabels := maps.Clone(labels)
	maps.Copy(podLabels, l.opts.PodLabels)

	nodeSelector, tolerations, affinity := l.placement(cfg)
	pullSecrets := pullSecretsOf(req)
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: kinds.Job.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name: jobName(id.Identifier), Namespace: cfg.Namespace, Labels: labels,
			Annotations: map[string]string{
				metakeys.IdentifierAnnotation: id.Identifier,
				metakeys.VersionAnnotation:    id.Version,
				metakeys.RegistryAnnotation:   id.Registry,
			},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To(l.opts.BackoffLimit),
			ActiveDeadlineSeconds:   ptr.To(int64(l.opts.ActiveDeadline / time.Second)),
			TTLSecondsAfterFinished: ptr.To(int32(l.opts.JobTTL / time.Second)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: l.opts.ServiceAccount,
					SecurityContext:    podsec.Pod(),
					NodeSelector:       nodeSelector,
					Tolerations:        tolerations,
					Affinity:           affinity,
					ImagePullSecrets:   pullSecrets,
					Containers: []corev1.Container{{
						Name:            "dump",
						Image:           req.Image,
						ImagePullPolicy: l.opts.ImagePullPolicy,
						Args:            []string{DumpFlag},
						Env:             l.env(req, cfgJSON), // see JobConfig
						SecurityContext: withReadOnlyRoot(podsec.Container()),
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("10m"),
							corev1.ResourceMemory: resource.MustParse("64Mi"),
						}},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
				},
			},
		},
	}, nil
}

// placement is where the dump pod runs: control-plane tolerations and a
// preferred control-plane affinity, plus the configuration's Infra
// placement and Options.Placement (node selectors and tolerations added,
// an affinity replacing the one before).
func (l *Loader) placement(cfg *identity.Config) (map[string]string, []corev1.Toleration, *corev1.Affinity) {
	tolerations := slices.Clone(controlPlaneTolerations)
	nodeSelector := map[string]string{}
	affinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 100,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "node-role.kubernetes.io/control-plane", Operator: corev1.NodeSelectorOpExists,
			}}},
		}},
	}}
	for _, p := range []*identity.NodePlacement{infra(cfg), l.opts.Placement} {
		if p == nil {
			continue
		}
		maps.Copy(nodeSelector, p.NodeSelector)
		tolerations = append(tolerations, p.Tolerations...)
		if p.Affinity != nil {
			affinity = p.Affinity.DeepCopy()
		}
	}
	if len(nodeSelector) == 0 {
		nodeSelector = nil
	}
	return nodeSelector, tolerations, affinity
}

// pullSecretsOf is the request's image pull secrets, without empty names
// and repeats.
func pullSecretsOf(req Request) []corev1.LocalObjectReference {
	var pullSecrets []corev1.LocalObjectReference
	for _, name := range req.ImagePullSecrets {
		if name != "" && !slices.Contains(pullSecrets, corev1.LocalObjectReference{Name: name}) {
			pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: name})
		}
	}
	return pullSecrets
}

// env is the dump container's environment: the configuration, the
// image's own reference under Options.ImageEnv, then Options.PodEnv.
func (l *Loader) env(req Request, cfgJSON []byte) []corev1.EnvVar {
	env := []corev1.EnvVar{{Name: identity.EnvVar, Value: string(cfgJSON)}}
	if l.opts.ImageEnv != "" {
		env = append(env, corev1.EnvVar{Name: l.opts.ImageEnv, Value: req.Image})
	}
	return append(env, l.opts.PodEnv...)
}

func infra(cfg *identity.Config) *identity.NodePlacement {
	if cfg.Placement == nil {
		return nil
	}
	return cfg.Placement.Infra
}

func withReadOnlyRoot(sc *corev1.SecurityContext) *corev1.SecurityContext {
	sc.ReadOnlyRootFilesystem = ptr.To(true)
	return sc
}

// ensureRBAC creates the dump service account, a Role that may only
// create, get and list ConfigMaps in the namespace (get and list make a
// second dump of the same identifier publish nothing), and their binding;
// with Options.ClusterRules, a ClusterRole of them bound to the account.
func (l *Loader) ensureRBAC(ctx context.Context, ns string) error {
	name := l.opts.ServiceAccount
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{metakeys.ManagedByLabel: metakeys.ManagedBy}}
	var errs []error
	create := func(what string, err error) {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("create %s %s/%s: %w", what, ns, name, err))
		}
	}
	_, err := l.opts.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{})
	create("service account", err)
	_, err = l.opts.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: meta,
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get", "list"}}},
	}, metav1.CreateOptions{})
	create("role", err)
	_, err = l.opts.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kinds.RoleKind.Kind, Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}, metav1.CreateOptions{})
	create("role binding", err)
	if l.opts.ClusterRules != nil {
		cluster := metav1.ObjectMeta{Name: name + "-" + ns, Labels: meta.Labels}
		_, err = l.opts.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: cluster, Rules: l.opts.ClusterRules}, metav1.CreateOptions{})
		create("cluster role", err)
		_, err = l.opts.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: cluster,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kinds.ClusterRole.Kind, Name: cluster.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
		}, metav1.CreateOptions{})
		create("cluster role binding", err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dump job rbac: %w", err)
	}
	return nil
}

// JobConfig returns the configuration JSON a dump Job's container is given
// (identity.EnvVar), or "" when the Job has none.
func JobConfig(j *batchv1.Job) string {
	for _, c := range j.Spec.Template.Spec.Containers {
		for _, env := range c.Env {
			if env.Name == identity.EnvVar {
				return env.Value
			}
		}
	}
	return ""
}
