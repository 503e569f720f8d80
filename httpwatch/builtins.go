package httpwatch

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/listwatch/listwatch/storage"
)

// The built-in resources, as kube-apiserver v1.37 serves them: scope, names, categories, field
// labels, subresources, and the parts of their registry strategies (k8s.io/kubernetes
// pkg/registry/<group>/<resource>/strategy.go) and printers (pkg/printers/internalversion) that
// concern an apiserver without controllers. Defaulting and type-specific validation are not
// mirrored: k8s.io/api ships neither.

// strategy is what a built-in kind's registry strategy does beyond the generic one.
type strategy struct {
	// prepareForCreate adjusts a new object (its status, finalizers).
	prepareForCreate func(obj map[string]any)
	// generation makes metadata.generation start at 1 and grow with every change of spec.
	generation bool
	// annotationsGeneration makes it grow with every change of the annotations too (deployments:
	// their controller copies the annotations to the replica sets).
	annotationsGeneration bool
	// allowCreateOnUpdate lets a PUT of a missing object create it.
	allowCreateOnUpdate bool
	// gracePeriod returns the grace period of a deletion and whether the kind deletes gracefully
	// at all, as RESTGracefulDeleteStrategy.CheckGracefulDelete.
	gracePeriod func(obj map[string]any, options *metav1.DeleteOptions) (int64, bool)
	// columns are the printer's columns after Name.
	columns []Column
	// validate is the part of the kind's validation that is mirrored (the size of a ConfigMap's or
	// Secret's data, an event's fields); old is nil on create.
	validate func(obj, old map[string]any) field.ErrorList
	// validatesMeta says validate checks the metadata itself on create, in its own place (events:
	// events.k8s.io/v1's strict checks, none at core/v1), and the generic checks follow only when
	// it finds nothing.
	validatesMeta bool
	// codec, if set, is the storage codec of a version stored at another (events.k8s.io/v1 events,
	// stored at core/v1).
	codec storage.Codec
	// coreErrors makes validation and precondition errors name the kind of the core group, as
	// upstream's do for a version validated as core's internal type (events.k8s.io/v1 events).
	coreErrors bool
	// noGarbageCollection is a DefaultGarbageCollectionPolicy of Unsupported (events): a delete
	// adds no orphan or foregroundDeletion finalizer.
	noGarbageCollection bool
	// eventTTL gives the objects Config.EventTTL from each create and update (events: the TTLFunc of
	// registry/core/event/storage).
	eventTTL bool
	// noNameColumn says the printer's columns do not start with Name (events: their columns name
	// it, last and wide only).
	noNameColumn bool
	// internalZero sets what the internal type's zero value has beyond the version's once
	// converted to it (a deployment's spec.replicas, an int32 there and a pointer in apps/v1):
	// upstream's BOOKMARK carries the storage's new internal object.
	internalZero func(obj map[string]any)
	// statusResets are the metadata fields an update of the status keeps as stored, beyond the
	// spec: the status strategy's PrepareForUpdate and GetResetFields (a deployment's labels).
	statusResets []string
}

func selectable(label string) SelectableField {
	return SelectableField{Label: label, Path: strings.Split(label, ".")}
}

// ageColumn is the printers' Age: the time since creation, in kubectl's short form. The columns'
// descriptions are the printers' (pkg/printers/internalversion AddHandlers): most are the Go
// types' documentation of the field shown.
var ageColumn = Column{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"],
	value: func(obj map[string]any, now time.Time) any { return age(obj, now) }}

func age(obj map[string]any, now time.Time) string {
	s, _, _ := unstructured.NestedString(obj, "metadata", "creationTimestamp")
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func lenOf(obj map[string]any, path ...string) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	switch t := v.(type) {
	case map[string]any:
		return int64(len(t))
	case []any:
		return int64(len(t))
	}
	return 0
}

func str(obj map[string]any, path ...string) string {
	s, _, _ := unstructured.NestedString(obj, path...)
	return s
}

func integer(obj map[string]any, path ...string) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	switch t := v.(type) {
	case int64:
		return t
	case float64:
		return int64(t)
	}
	return 0
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// ConfigMaps is core/v1 configmaps.
func ConfigMaps() Resource {
	return Resource{
		Version: "v1", Resource: "configmaps", Kind: "ConfigMap", ShortNames: []string{"cm"},
		Namespaced: true, BuiltIn: true, AllowUnconditionalUpdate: true,
		strategy: &strategy{validate: validateConfigMapSize, columns: []Column{
			{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"],
				value: func(obj map[string]any, _ time.Time) any { return lenOf(obj, "data") + lenOf(obj, "binaryData") }},
			ageColumn,
		}},
	}
}

// Secrets is core/v1 secrets, with the type field label.
func Secrets() Resource {
	return Resource{
		Version: "v1", Resource: "secrets", Kind: "Secret",
		Namespaced: true, BuiltIn: true, AllowUnconditionalUpdate: true,
		SelectableFields: []SelectableField{selectable("type")},
		strategy: &strategy{validate: validateSecretSize, columns: []Column{
			{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"],
				value: func(obj map[string]any, _ time.Time) any { return str(obj, "type") }},
			{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"],
				value: func(obj map[string]any, _ time.Time) any { return lenOf(obj, "data") }},
			ageColumn,
		}},
	}
}

// Pods is core/v1 pods with the pod field labels (pkg/registry/core/pod ToSelectableFields), the
// status subresource and the watch cache's spec.nodeName trigger (pkg/registry/core/pod/storage
// storage.go TriggerFunc, strategy.go NodeNameTriggerFunc and MatchPod's IndexFields), so that a
// kubelet's watch is offered only its node's pods. Deletion is graceful as upstream: a pod bound to a node
// (spec.nodeName) that has not finished is only marked, with the grace period of the request or
// of spec.terminationGracePeriodSeconds (30 s when unset), until a delete with gracePeriodSeconds=0
// removes it, as a kubelet would; an unbound or finished pod is deleted at once.
func Pods() Resource {
	return Resource{
		Version: "v1", Resource: "pods", Kind: "Pod", ShortNames: []string{"po"}, Categories: []string{"all"},
		Namespaced: true, BuiltIn: true, AllowUnconditionalUpdate: true, ReturnDeletedObject: true,
		StatusSubresource: true,
		SelectableFields: []SelectableField{
			selectable("spec.nodeName"), selectable("spec.restartPolicy"), selectable("spec.schedulerName"),
			selectable("spec.serviceAccountName"), selectable("spec.hostNetwork"), selectable("status.phase"),
			selectable("status.podIP"), selectable("status.nominatedNodeName"),
		},
		TriggerField: "spec.nodeName",
		strategy: &strategy{
			prepareForCreate: func(obj map[string]any) {
				obj["status"] = map[string]any{"phase": "Pending"}
			},
			gracePeriod: podGracePeriod,
			columns:     podColumns,
			// Old kubelets corrupted owner references through pods/status (podStatusStrategy).
			statusResets: []string{"ownerReferences", "deletionTimestamp"},
		},
	}
}

// podGracePeriod mirrors podStrategy.CheckGracefulDelete with the defaulted termination grace
// period of 30 s.
func podGracePeriod(obj map[string]any, options *metav1.DeleteOptions) (int64, bool) {
	period := int64(30)
	if options.GracePeriodSeconds != nil {
		period = *options.GracePeriodSeconds
	} else if v, found, _ := unstructured.NestedFieldNoCopy(obj, "spec", "terminationGracePeriodSeconds"); found {
		switch t := v.(type) {
		case int64:
			period = t
		case float64:
			period = int64(t)
		}
	}
	// An unscheduled pod, or one that has finished, has nothing to wait for.
	if str(obj, "spec", "nodeName") == "" {
		period = 0
	}
	if phase := str(obj, "status", "phase"); phase == "Failed" || phase == "Succeeded" {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	return period, true
}

var podColumns = []Column{
	{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic.",
		value: func(obj map[string]any, _ time.Time) any {
			statuses, _, _ := unstructured.NestedSlice(obj, "status", "containerStatuses")
			ready := 0
			for _, s := range statuses {
				if m, ok := s.(map[string]any); ok && m["ready"] == true {
					ready++
				}
			}
			return fmt.Sprintf("%d/%d", ready, lenOf(obj, "spec", "containers"))
		}},
	{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod.",
		value: func(obj map[string]any, _ time.Time) any {
			if _, found, _ := unstructured.NestedFieldNoCopy(obj, "metadata", "deletionTimestamp"); found {
				return "Terminating"
			}
			if reason := str(obj, "status", "reason"); reason != "" {
				return reason
			}
			return str(obj, "status", "phase")
		}},
	{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
		value: func(obj map[string]any, _ time.Time) any {
			statuses, _, _ := unstructured.NestedSlice(obj, "status", "containerStatuses")
			var restarts int64
			for _, s := range statuses {
				if m, ok := s.(map[string]any); ok {
					restarts += integer(m, "restartCount")
				}
			}
			// A string, as printPod's, which also appends the time since the last restart: left out.
			return strconv.FormatInt(restarts, 10)
		}},
	ageColumn,
	{Name: "IP", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["podIP"],
		value: func(obj map[string]any, _ time.Time) any { return orNone(str(obj, "status", "podIP")) }},
	{Name: "Node", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["nodeName"],
		value: func(obj map[string]any, _ time.Time) any { return orNone(str(obj, "spec", "nodeName")) }},
	{Name: "Nominated Node", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"],
		value: func(obj map[string]any, _ time.Time) any { return orNone(str(obj, "status", "nominatedNodeName")) }},
	{Name: "Readiness Gates", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["readinessGates"],
		value: func(obj map[string]any, _ time.Time) any {
			if n := lenOf(obj, "spec", "readinessGates"); n > 0 {
				return fmt.Sprintf("0/%d", n)
			}
			return "<none>"
		}},
}

// Services is core/v1 services with the status subresource and the spec.clusterIP and spec.type
// field labels (pkg/registry/core/service SelectableFields), kept at /registry/services/specs/ as
// kube-apiserver keeps them (pkg/kubeapiserver/default_storage_factory_builder.go
// SpecialDefaultResourcePrefixes), so that either can serve the other's store and a failed
// precondition names the same key. No cluster IP is allocated: there is no IP allocator.
func Services() Resource {
	return Resource{
		Version: "v1", Resource: "services", Kind: "Service", ShortNames: []string{"svc"}, Categories: []string{"all"},
		KeyPrefix:  "/services/specs",
		Namespaced: true, BuiltIn: true, AllowUnconditionalUpdate: true, StatusSubresource: true,
		SelectableFields: []SelectableField{selectable("spec.clusterIP"), selectable("spec.type")},
		strategy: &strategy{
			prepareForCreate: func(obj map[string]any) {
				obj["status"] = map[string]any{"loadBalancer": map[string]any{}}
			},
			allowCreateOnUpdate: true,
			columns:             serviceColumns,
		},
	}
}

// serviceColumns mirror printService (pkg/printers/internalversion). Listwatch stores a service
// without the defaults kube-apiserver's would have (type, clusterIPs, port protocols): the cells
// read them as that defaulting sets them, but for a BOOKMARK's zero service, which upstream prints
// as it is.
var serviceColumns = []Column{
	{Name: "Type", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["type"],
		value: func(obj map[string]any, _ time.Time) any { return serviceType(obj) }},
	{Name: "Cluster-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"],
		value: func(obj map[string]any, _ time.Time) any {
			if ips, _, _ := unstructured.NestedStringSlice(obj, "spec", "clusterIPs"); len(ips) > 0 {
				return ips[0]
			}
			return orNone(str(obj, "spec", "clusterIP"))
		}},
	{Name: "External-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"],
		value: serviceExternalIP},
	{Name: "Port(s)", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["ports"],
		value: servicePorts},
	ageColumn,
	{Name: "Selector", Type: "string", Priority: 1, Description: corev1.ServiceSpec{}.SwaggerDoc()["selector"],
		value: func(obj map[string]any, _ time.Time) any {
			sel, _, _ := unstructured.NestedStringMap(obj, "spec", "selector")
			return labels.FormatLabels(sel)
		}},
}

// created says whether obj went through a create, which gives it a creationTimestamp and, in
// kube-apiserver, its kind's defaults; a BOOKMARK's zero object did not.
func created(obj map[string]any) bool { return str(obj, "metadata", "creationTimestamp") != "" }

// serviceType is spec.type, ClusterIP (its default) when a created service has none.
func serviceType(obj map[string]any) string {
	t := str(obj, "spec", "type")
	if t == "" && created(obj) {
		t = "ClusterIP"
	}
	return t
}

// serviceExternalIP mirrors getServiceExternalIP (pkg/printers/internalversion) with the wide
// output the server's Tables use: the external IPs, a load balancer's ingress too, an external
// name's DNS name, <unknown> for another type.
func serviceExternalIP(obj map[string]any, _ time.Time) any {
	ips, _, _ := unstructured.NestedStringSlice(obj, "spec", "externalIPs")
	switch serviceType(obj) {
	case "ClusterIP", "NodePort":
		return orNone(strings.Join(ips, ","))
	case "LoadBalancer":
		if out := append(loadBalancerIngress(obj), ips...); len(out) > 0 {
			return strings.Join(out, ",")
		}
		return "<pending>"
	case "ExternalName":
		return str(obj, "spec", "externalName")
	}
	return "<unknown>"
}

// loadBalancerIngress mirrors loadBalancerStatusStringer: each ingress point's IP, else its
// hostname, sorted and without repeats.
func loadBalancerIngress(obj map[string]any) []string {
	ingress, _, _ := unstructured.NestedSlice(obj, "status", "loadBalancer", "ingress")
	set := sets.New[string]()
	for _, i := range ingress {
		if m, ok := i.(map[string]any); ok {
			if ip := str(m, "ip"); ip != "" {
				set.Insert(ip)
			} else if host := str(m, "hostname"); host != "" {
				set.Insert(host)
			}
		}
	}
	return sets.List(set)
}

// servicePorts mirrors makePortString: port/protocol, port:nodePort/protocol with a node port, the
// protocol TCP by default.
func servicePorts(obj map[string]any, _ time.Time) any {
	ports, _, _ := unstructured.NestedSlice(obj, "spec", "ports")
	var out []string
	for _, p := range ports {
		m, ok := p.(map[string]any)
		if !ok {
			continue
		}
		proto := str(m, "protocol")
		if proto == "" {
			proto = "TCP"
		}
		if np := integer(m, "nodePort"); np > 0 {
			out = append(out, fmt.Sprintf("%d:%d/%s", integer(m, "port"), np, proto))
		} else {
			out = append(out, fmt.Sprintf("%d/%s", integer(m, "port"), proto))
		}
	}
	return orNone(strings.Join(out, ","))
}

// Namespaces is core/v1 namespaces, cluster-scoped, with the status subresource and the
// status.phase field label. A new namespace is Active with the "kubernetes" finalizer in
// spec.finalizers; deleting it marks it Terminating, and, with no namespace controller to empty
// and finalize it, it stays so until a PUT to its finalize subresource clears spec.finalizers,
// as on an apiserver without a controller manager.
func Namespaces() Resource {
	return Resource{
		Version: "v1", Resource: "namespaces", Kind: "Namespace", ShortNames: []string{"ns"},
		BuiltIn: true, AllowUnconditionalUpdate: true, StatusSubresource: true,
		SelectableFields: []SelectableField{selectable("status.phase")},
		strategy: &strategy{
			prepareForCreate: func(obj map[string]any) {
				obj["status"] = map[string]any{"phase": "Active"}
				spec, _ := obj["spec"].(map[string]any)
				if spec == nil {
					spec = map[string]any{}
					obj["spec"] = spec
				}
				finalizers, _ := spec["finalizers"].([]any)
				for _, f := range finalizers {
					if f == namespaceFinalizer {
						return
					}
				}
				spec["finalizers"] = append(finalizers, namespaceFinalizer)
			},
			columns: []Column{
				{Name: "Status", Type: "string", Description: "The status of the namespace",
					value: func(obj map[string]any, _ time.Time) any { return str(obj, "status", "phase") }},
				ageColumn,
			},
		},
	}
}

// namespaceFinalizer is core/v1 FinalizerKubernetes, the namespace controller's.
const namespaceFinalizer = "kubernetes"

// Deployments is apps/v1 deployments with the status and scale subresources, as the deployment
// strategies (pkg/registry/apps/deployment): a new one has an empty status, metadata.generation
// counts changes of spec and annotations, and an update of the status keeps the labels.
func Deployments() Resource {
	return Resource{
		Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment", ShortNames: []string{"deploy"},
		Categories: []string{"all"}, Namespaced: true, BuiltIn: true, AllowUnconditionalUpdate: true,
		StatusSubresource: true,
		Scale:             &ScaleSubresource{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ".spec.selector"},
		strategy: &strategy{
			prepareForCreate:      func(obj map[string]any) { obj["status"] = map[string]any{} },
			generation:            true,
			annotationsGeneration: true,
			internalZero: func(obj map[string]any) {
				_ = unstructured.SetNestedField(obj, int64(0), "spec", "replicas") // spec is a map in the zero object
			},
			statusResets: []string{"labels"},
			columns: []Column{
				{Name: "Ready", Type: "string", Description: "Number of the pod with ready state",
					value: func(obj map[string]any, _ time.Time) any {
						return fmt.Sprintf("%d/%d", integer(obj, "status", "readyReplicas"), integer(obj, "spec", "replicas"))
					}},
				{Name: "Up-to-date", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"],
					value: func(obj map[string]any, _ time.Time) any { return integer(obj, "status", "updatedReplicas") }},
				{Name: "Available", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"],
					value: func(obj map[string]any, _ time.Time) any { return integer(obj, "status", "availableReplicas") }},
				ageColumn,
				{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template.",
					value: func(obj map[string]any, _ time.Time) any { return templateContainers(obj, "name") }},
				{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template.",
					value: func(obj map[string]any, _ time.Time) any { return templateContainers(obj, "image") }},
				{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.DeploymentSpec{}.SwaggerDoc()["selector"],
					value: deploymentSelector},
			},
		},
	}
}

func templateContainers(obj map[string]any, key string) string {
	containers, _, _ := unstructured.NestedSlice(obj, "spec", "template", "spec", "containers")
	var out []string
	for _, c := range containers {
		if m, ok := c.(map[string]any); ok {
			out = append(out, str(m, key))
		}
	}
	return strings.Join(out, ",")
}

// deploymentSelector is the Selector cell of printDeployment (pkg/printers/internalversion): the
// label selector's string form, "" for none (the zero deployment of a BOOKMARK), "<invalid>" for one
// that does not parse.
func deploymentSelector(obj map[string]any, _ time.Time) any {
	s, err := labelSelectorAt(obj, "spec", "selector")
	if err != nil {
		return "<invalid>"
	}
	return s
}

// labelSelectorAt is the metav1.LabelSelector at path in its string form, as
// metav1.LabelSelectorAsSelector gives it: "" when there is none, nothing selected.
func labelSelectorAt(obj map[string]any, path ...string) (string, error) {
	var ls *metav1.LabelSelector
	// A null selector is none, as a nil *metav1.LabelSelector.
	if v, _, _ := unstructured.NestedFieldNoCopy(obj, path...); v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return "", fmt.Errorf("%s: %T is not a label selector", strings.Join(path, "."), v)
		}
		ls = &metav1.LabelSelector{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, ls); err != nil {
			return "", err
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return "", err
	}
	return selector.String(), nil
}

// Widgets is widgets.example.com/v1, a namespaced custom resource with no schema.
func Widgets() Resource {
	return Resource{Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget", Namespaced: true}
}

// BuiltInResources returns the built-in resources: ConfigMaps, Secrets, Pods, Services,
// Namespaces, Events, Deployments and EventsV1.
func BuiltInResources() []Resource {
	return []Resource{ConfigMaps(), Secrets(), Pods(), Services(), Namespaces(), Events(), Deployments(), EventsV1()}
}

// DefaultResources returns the resources `listwatch serve` serves: BuiltInResources and Widgets.
func DefaultResources() []Resource { return append(BuiltInResources(), Widgets()) }
