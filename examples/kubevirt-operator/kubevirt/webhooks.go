package kubevirt

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// virt-operator's own webhooks in KubeVirt's strategy: the
// ValidatingWebhookConfiguration virt-operator-validator sends the
// KubeVirt CR's create, update and delete to Service
// kubevirt-operator-webhook (selecting kubevirt.io=virt-operator, port
// "webhooks"), with the certificate of kubevirt-operator-certs.
const (
	WebhookConfiguration = "virt-operator-validator"
	WebhookSecret        = "kubevirt-operator-certs"
	// WebhookPort is virt-operator's container port "webhooks", which the
	// Service targets.
	WebhookPort = 8444
	PathCreate  = "/kubevirt-validate-create"
	PathUpdate  = "/kubevirt-validate-update"
	PathDelete  = "/kubevirt-validate-delete"
)

// OperatorLabels are the labels of virt-operator's pods, which the
// strategy's Service kubevirt-operator-webhook selects: the example's
// pods carry them (config/operator.yaml).
var OperatorLabels = map[string]string{metakeys.KubeVirtLabel: metakeys.KubeVirtManagedBy}

// Webhooks are virt-operator-validator's webhooks in namespace ns, served
// by the example with virt-operator's validations: c reads with the
// operator's identity (uncached: mgr.GetAPIReader() works) and makes the
// update validator's placement dry runs.
func Webhooks(c client.Client, r client.Reader, ns string) operator.Webhooks {
	return operator.Webhooks{Configuration: WebhookConfiguration, Namespace: ns, Secret: WebhookSecret, Port: WebhookPort,
		Handlers: map[string]admission.Handler{
			PathCreate: CreateValidator{Reader: r},
			PathUpdate: UpdateValidator{Client: c},
			PathDelete: DeleteValidator{Reader: r},
		}}
}

// refuse is virt-operator's refusal of an error (webhookutils'
// ToAdmissionResponseError): not allowed, code 400, the error's message.
func refuse(err error) admission.Response {
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false,
		Result: &metav1.Status{Message: err.Error(), Code: http.StatusBadRequest}}}
}

// workloads are the kinds whose objects block an uninstall, in the order
// virt-operator lists them, with the words of its message.
var workloads = []struct{ kind, words string }{
	{"VirtualMachineInstance", "Virtual Machine Instances"},
	{"VirtualMachine", "Virtual Machines"},
	{"VirtualMachineInstanceReplicaSet", "Virtual Machine Instance Replica Sets"},
}

const uninstallRefused = "Rejecting the uninstall request, since there are still %s present. Either delete all KubeVirt related workloads or change the uninstall strategy before uninstalling KubeVirt."

// DeleteValidator is virt-operator's KubeVirtDeletionAdmitter
// (/kubevirt-validate-delete): deleting a deployed KubeVirt whose
// uninstallStrategy is BlockUninstallIfWorkloadsExist is refused while
// any VirtualMachineInstance, VirtualMachine or
// VirtualMachineInstanceReplicaSet exists in any namespace. An empty
// uninstallStrategy passes, as in virt-operator (KubeVirt's CRD defaults
// it to BlockUninstallIfWorkloadsExist, so a stored CR has it).
type DeleteValidator struct {
	Reader client.Reader
}

// Handle implements admission.Handler.
func (v DeleteValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	kv := &unstructured.Unstructured{}
	kv.SetGroupVersionKind(GVK)
	if req.Name != "" {
		if err := v.Reader.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name}, kv); err != nil {
			return refuse(err)
		}
	} else {
		// A delete of the collection: virt-operator judges by the first.
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(GVK.GroupVersion().WithKind(GVK.Kind + "List"))
		if err := v.Reader.List(ctx, list, client.InNamespace(req.Namespace)); err != nil {
			return refuse(err)
		}
		if len(list.Items) == 0 {
			return admission.Allowed("")
		}
		kv = &list.Items[0]
	}
	strategy, _, _ := unstructured.NestedString(kv.Object, "spec", "uninstallStrategy")
	if strategy == "" || strategy == "RemoveWorkloads" {
		return admission.Allowed("")
	}
	if phase, _, _ := unstructured.NestedString(kv.Object, "status", "phase"); phase != "Deployed" {
		return admission.Allowed("")
	}
	for _, w := range workloads {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(GVK.GroupVersion().WithKind(w.kind + "List"))
		if err := v.Reader.List(ctx, list, client.Limit(2)); err != nil {
			return refuse(err)
		}
		if len(list.Items) > 0 {
			return refuse(fmt.Errorf(uninstallRefused, w.words))
		}
	}
	return admission.Allowed("")
}

// CreateValidator is virt-operator's kubeVirtCreateAdmitter
// (/kubevirt-validate-create): a KubeVirt is refused while another exists
// in any namespace (virt-operator installs the webhook once the first
// KubeVirt exists, so it guards against a second one).
type CreateValidator struct {
	Reader client.Reader
}

// Handle implements admission.Handler.
func (v CreateValidator) Handle(ctx context.Context, _ admission.Request) admission.Response {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(GVK.GroupVersion().WithKind(GVK.Kind + "List"))
	if err := v.Reader.List(ctx, list); err != nil {
		return refuse(err)
	}
	if len(list.Items) == 0 {
		return admission.Allowed("")
	}
	return refuse(fmt.Errorf("Kubevirt is already created")) //nolint:staticcheck // virt-operator's words
}

// placement is KubeVirt's NodePlacement.
type placement struct {
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Affinity     *corev1.Affinity    `json:"affinity,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
}

// certConfig is KubeVirt's KubeVirtCertConfig.
type certConfig struct {
	Duration    *metav1.Duration `json:"duration,omitempty"`
	RenewBefore *metav1.Duration `json:"renewBefore,omitempty"`
}

// selfSigned is KubeVirt's KubeVirtSelfSignConfiguration.
type selfSigned struct {
	CARotateInterval   *metav1.Duration `json:"caRotateInterval,omitempty"`
	CertRotateInterval *metav1.Duration `json:"certRotateInterval,omitempty"`
	CAOverlapInterval  *metav1.Duration `json:"caOverlapInterval,omitempty"`
	CA                 *certConfig      `json:"ca,omitempty"`
	Server             *certConfig      `json:"server,omitempty"`
}

// customProfile is KubeVirt's CustomProfile (seccomp).
type customProfile struct {
	LocalhostProfile      *string `json:"localhostProfile,omitempty"`
	RuntimeDefaultProfile bool    `json:"runtimeDefaultProfile,omitempty"`
}

// seccomp is KubeVirt's SeccompConfiguration.
type seccomp struct {
	VirtualMachineInstanceProfile *struct {
		CustomProfile *customProfile `json:"customProfile,omitempty"`
	} `json:"virtualMachineInstanceProfile,omitempty"`
}

// tlsConfiguration is KubeVirt's TLSConfiguration.
type tlsConfiguration struct {
	MinTLSVersion string   `json:"minTLSVersion,omitempty"`
	Ciphers       []string `json:"ciphers,omitempty"`
}

// developer is the feature gates of KubeVirt's DeveloperConfiguration.
type developer struct {
	FeatureGates         []string `json:"featureGates,omitempty"`
	DisabledFeatureGates []string `json:"disabledFeatureGates,omitempty"`
}

// updateSpec is the part of KubeVirt's spec the update validator reads.
type updateSpec struct {
	CustomizeComponents struct {
		Patches []struct {
			Patch string `json:"patch"`
		} `json:"patches,omitempty"`
	} `json:"customizeComponents"`
	CertificateRotateStrategy struct {
		SelfSigned *selfSigned `json:"selfSigned,omitempty"`
	} `json:"certificateRotateStrategy"`
	Configuration struct {
		AdditionalGuestMemoryOverheadRatio *string           `json:"additionalGuestMemoryOverheadRatio,omitempty"`
		TLSConfiguration                   *tlsConfiguration `json:"tlsConfiguration,omitempty"`
		SeccompConfiguration               *seccomp          `json:"seccompConfiguration,omitempty"`
		DeveloperConfiguration             *developer        `json:"developerConfiguration,omitempty"`
	} `json:"configuration"`
	Infra *struct {
		NodePlacement *placement `json:"nodePlacement,omitempty"`
		Replicas      *uint8     `json:"replicas,omitempty"`
	} `json:"infra,omitempty"`
	Workloads *struct {
		NodePlacement *placement `json:"nodePlacement,omitempty"`
	} `json:"workloads,omitempty"`
}

// UpdateValidator is virt-operator's KubeVirtUpdateAdmitter
// (/kubevirt-validate-update), for the fields that change what is
// installed or how it is served: customizeComponents patches are JSON;
// certificate rotation durations are consistent (virt-operator's defaults:
// CA 7 days, server 1 day, renew 20% before); the TLS configuration (when
// changed) names no ciphers with TLS 1.3 or no minimum, and only ciphers
// Go knows; infra and workloads placement (when changed) pass a dry-run
// create of a Deployment or DaemonSet carrying them in the KubeVirt's
// namespace; the seccomp configuration (when changed) has a custom
// profile, not both kinds; infra replicas are not 0; the guest memory
// overhead ratio is a number of at least 1; a feature gate (when changed)
// is not both enabled and disabled. Not done (they judge VM features the
// example does not install differently): the migration configuration,
// virt-template and role aggregation gates, and virt-operator's warnings
// about deprecated feature gates, mediated devices and architectures.
type UpdateValidator struct {
	// Client makes the placement dry runs.
	Client client.Client
}

// Handle implements admission.Handler.
func (v UpdateValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Group != GVK.Group || req.Kind.Kind != GVK.Kind {
		return refuse(fmt.Errorf("expect resource to be '%s/%s'", GVK.Group, "kubevirts"))
	}
	var cur, next struct {
		Spec updateSpec `json:"spec"`
	}
	if err := json.Unmarshal(req.Object.Raw, &next); err != nil {
		return refuse(err)
	}
	if err := json.Unmarshal(req.OldObject.Raw, &cur); err != nil {
		return refuse(err)
	}
	n, c := &next.Spec, &cur.Spec
	var causes []metav1.StatusCause
	invalid := func(field, format string, args ...any) {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	for _, p := range n.CustomizeComponents.Patches {
		if !json.Valid([]byte(p.Patch)) {
			causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueNotSupported, Message: fmt.Sprintf("patch %q is not valid JSON", p.Patch)})
		}
	}
	causes = append(causes, certificateCauses(n.CertificateRotateStrategy.SelfSigned)...)
	if r := n.Configuration.AdditionalGuestMemoryOverheadRatio; r != nil {
		if f, err := strconv.ParseFloat(*r, 64); err != nil {
			causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueNotSupported, Message: fmt.Sprintf("ratio provided, %s, cannot be parsed into float: %v", *r, err)})
		} else if f < 1.0 {
			causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueNotSupported, Message: fmt.Sprintf("ratio provided, %s, cannot be smaller than 1.0", *r)})
		}
	}
	if t := n.Configuration.TLSConfiguration; t != nil && !equality.Semantic.DeepEqual(c.Configuration.TLSConfiguration, t) {
		causes = append(causes, tlsCauses(t)...)
	}
	if n.Infra != nil && n.Infra.NodePlacement != nil && (c.Infra == nil || !equality.Semantic.DeepEqual(c.Infra.NodePlacement, n.Infra.NodePlacement)) {
		if err := v.dryRun(ctx, req.Namespace, n.Infra.NodePlacement, false); err != nil {
			invalid("", "%s", err.Error())
		}
	}
	if n.Workloads != nil && n.Workloads.NodePlacement != nil && (c.Workloads == nil || !equality.Semantic.DeepEqual(c.Workloads.NodePlacement, n.Workloads.NodePlacement)) {
		if err := v.dryRun(ctx, req.Namespace, n.Workloads.NodePlacement, true); err != nil {
			invalid("", "%s", err.Error())
		}
	}
	if !equality.Semantic.DeepEqual(c.Configuration.SeccompConfiguration, n.Configuration.SeccompConfiguration) {
		causes = append(causes, seccompCauses(n.Configuration.SeccompConfiguration)...)
	}
	if n.Infra != nil && n.Infra.Replicas != nil && *n.Infra.Replicas == 0 {
		invalid("", "infra replica count can't be 0")
	}
	if d := n.Configuration.DeveloperConfiguration; d != nil && !equality.Semantic.DeepEqual(c.Configuration.DeveloperConfiguration, d) {
		for _, g := range d.FeatureGates {
			if slices.Contains(d.DisabledFeatureGates, g) {
				causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeForbidden, Field: "spec.configuration.developerConfiguration.featureGates",
					Message: fmt.Sprintf(`feature gate "%s" exists on both "FeatureGates" and "DisabledFeatureGates"`, g)})
			}
		}
	}
	if len(causes) == 0 {
		return admission.Allowed("")
	}
	// virt-operator's NewAdmissionResponse: the causes' messages joined.
	msgs := make([]string, len(causes))
	for i, c := range causes {
		msgs[i] = c.Message
	}
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Message: strings.Join(msgs, ", "), Reason: metav1.StatusReasonInvalid, Code: http.StatusUnprocessableEntity,
		Details: &metav1.StatusDetails{Causes: causes}}}}
}

// dryRun creates, as a server-side dry run, the Deployment (infra) or
// DaemonSet (workloads) virt-operator creates to validate a placement.
func (v UpdateValidator) dryRun(ctx context.Context, ns string, p *placement, daemonSet bool) error {
	const name, label = "placement-validation-webhook", metakeys.KubeVirtChooseMeLabel
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{label: ""}}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "placement-verification-pod", Labels: map[string]string{label: ""}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "placement-verification-pod", Image: "test.only:latest"}},
			NodeSelector: p.NodeSelector, Affinity: p.Affinity, Tolerations: p.Tolerations},
	}
	var obj client.Object = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: sel, Template: tmpl}}
	if daemonSet {
		obj = &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}}
	}
	return v.Client.Create(ctx, obj, client.DryRunAll)
}

// certificateCauses is virt-operator's validateCertificates.
func certificateCauses(c *selfSigned) []metav1.StatusCause {
	if c == nil {
		return nil
	}
	var causes []metav1.StatusCause
	deprecated := c.CARotateInterval != nil || c.CertRotateInterval != nil || c.CAOverlapInterval != nil
	if deprecated && (c.CA != nil || c.Server != nil) {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueNotSupported,
			Message: "caRotateInterval, certRotateInterval and caOverlapInterval are deprecated and conflict with CertConfig defined rotation parameters"})
	}
	pick := func(def time.Duration, vals ...*metav1.Duration) time.Duration {
		for _, v := range vals {
			if v != nil {
				return v.Duration
			}
		}
		return def
	}
	var caD, caR, srvD, srvR *metav1.Duration
	if c.CA != nil {
		caD, caR = c.CA.Duration, c.CA.RenewBefore
	}
	if c.Server != nil {
		srvD, srvR = c.Server.Duration, c.Server.RenewBefore
	}
	ca := pick(7*24*time.Hour, c.CARotateInterval, caD)
	caRenew := pick(time.Duration(float64(ca)*0.2), c.CAOverlapInterval, caR)
	cert := pick(24*time.Hour, c.CertRotateInterval, srvD)
	certRenew := pick(time.Duration(float64(cert)*0.2), srvR)
	if ca < caRenew {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid,
			Message: "CA RenewBefore cannot exceed Duration (spec.certificateRotationStrategy.selfSigned.ca.duration < spec.certificateRotationStrategy.selfSigned.ca.renewBefore)"})
	}
	if cert < certRenew {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid,
			Message: "Cert RenewBefore cannot exceed Duration (spec.certificateRotationStrategy.selfSigned.server.duration < spec.certificateRotationStrategy.selfSigned.server.renewBefore)"})
	}
	if cert > ca {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid,
			Message: "Certificate duration cannot exceed CA (spec.certificateRotationStrategy.selfSigned.server.duration > spec.certificateRotationStrategy.selfSigned.ca.duration)"})
	}
	return causes
}

// tlsCauses is virt-operator's validateTLSConfiguration; the ciphers it
// knows are Go's (KubeVirt's list is Go's, secure and insecure).
func tlsCauses(t *tlsConfiguration) []metav1.StatusCause {
	if t.MinTLSVersion == "VersionTLS13" || t.MinTLSVersion == "" {
		if len(t.Ciphers) > 0 {
			return []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueNotSupported, Field: "spec.configuration.tlsConfiguration.ciphers",
				Message: "You cannot specify ciphers when spec.configuration.tlsConfiguration.minTLSVersion is empty or VersionTLS13"}}
		}
		return nil
	}
	known := map[string]bool{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		known[s.Name] = true
	}
	var causes []metav1.StatusCause
	for i, c := range t.Ciphers {
		if !known[c] {
			causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueNotSupported,
				Message: fmt.Sprintf("%s is not a valid cipher", c), Field: fmt.Sprintf("spec.configuration.tlsConfiguration.ciphers#%d", i)})
		}
	}
	return causes
}

// seccompCauses is virt-operator's validateSeccompConfiguration.
func seccompCauses(s *seccomp) []metav1.StatusCause {
	if s == nil || s.VirtualMachineInstanceProfile == nil {
		return nil
	}
	const f = "spec.configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile"
	p := s.VirtualMachineInstanceProfile.CustomProfile
	if p == nil {
		return []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: f, Message: f + " needs to be set"}}
	}
	if p.LocalhostProfile != nil && p.RuntimeDefaultProfile {
		lp, rd := f+".localhostProfile", f+".runtimeDefaultProfile"
		return []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldValueInvalid, Field: lp, Message: fmt.Sprintf("%s cannot be set when %s is set", lp, rd)},
			{Type: metav1.CauseTypeFieldValueInvalid, Field: rd, Message: fmt.Sprintf("%s cannot be set when %s is set", rd, lp)},
		}
	}
	return nil
}
