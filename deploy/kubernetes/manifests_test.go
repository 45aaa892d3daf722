// Renders every overlay with kustomize's own Go API (krusty, what `kustomize build` runs) and decodes every object
// strictly into the official Kubernetes API types, so an unknown field, a wrong type or a duplicate key fails.
// Then checks what a cluster would refuse or a platform team would regret: probes, non-root, read-only root,
// resources, tagged images, and autoscalers and disruption budgets that point at real Deployments.
// With RAGLINE_RENDER_DIR set, each overlay's output is written there (the Python test checks it against the code).
package kubernetes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

var overlays = []string{"overlays/dev", "overlays/production"}

type rendered struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	hpas        map[string]*autoscalingv2.HorizontalPodAutoscaler
	pdbs        map[string]*policyv1.PodDisruptionBudget
}

// decode reads one object strictly into its API type: an unknown field, a wrong type or a duplicate key fails.
func decode[T any](t *testing.T, doc []byte) *T {
	t.Helper()
	obj := new(T)
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatalf("strict decoding failed: %v\n%s", err, doc)
	}
	return obj
}

func render(t *testing.T, overlay string) rendered {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), overlay)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", overlay, err)
	}
	out := rendered{map[string]*appsv1.Deployment{}, map[string]*corev1.Service{}, map[string]*corev1.ConfigMap{},
		map[string]*autoscalingv2.HorizontalPodAutoscaler{}, map[string]*policyv1.PodDisruptionBudget{}}
	var all []string
	for _, res := range resources.Resources() {
		doc, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, string(doc))
		switch kind := res.GetKind(); kind {
		case "Deployment":
			d := decode[appsv1.Deployment](t, doc)
			out.deployments[d.Name] = d
		case "Service":
			svc := decode[corev1.Service](t, doc)
			out.services[svc.Name] = svc
		case "ConfigMap":
			c := decode[corev1.ConfigMap](t, doc)
			out.configMaps[c.Name] = c
		case "HorizontalPodAutoscaler":
			h := decode[autoscalingv2.HorizontalPodAutoscaler](t, doc)
			out.hpas[h.Name] = h
		case "PodDisruptionBudget":
			p := decode[policyv1.PodDisruptionBudget](t, doc)
			out.pdbs[p.Name] = p
		default:
			t.Fatalf("%s renders a %s, which this test does not know how to check", overlay, kind)
		}
	}
	if dir := os.Getenv("RAGLINE_RENDER_DIR"); dir != "" {
		name := filepath.Join(dir, filepath.Base(overlay)+".yaml")
		if err := os.WriteFile(name, []byte(strings.Join(all, "---\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestEveryOverlayRendersAndDecodesStrictly(t *testing.T) {
	for _, overlay := range overlays {
		t.Run(filepath.Base(overlay), func(t *testing.T) {
			r := render(t, overlay)
			if len(r.deployments) != 7 || len(r.services) != 7 || len(r.configMaps) != 1 {
				t.Fatalf("want 7 Deployments, 7 Services and 1 ConfigMap, got %d, %d, %d", len(r.deployments), len(r.services), len(r.configMaps))
			}
			for name, d := range r.deployments {
				checkDeployment(t, name, d)
			}
			for name, s := range r.services {
				if len(s.Spec.Selector) == 0 || !selectsADeployment(s.Spec.Selector, r.deployments) {
					t.Errorf("Service %s selects no Deployment", name)
				}
			}
			for name, h := range r.hpas {
				if _, ok := r.deployments[h.Spec.ScaleTargetRef.Name]; !ok || h.Spec.ScaleTargetRef.Kind != "Deployment" {
					t.Errorf("HPA %s scales %s %s, which is not rendered", name, h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name)
				}
			}
			for name, p := range r.pdbs {
				if p.Spec.Selector == nil || !selectsADeployment(p.Spec.Selector.MatchLabels, r.deployments) {
					t.Errorf("PodDisruptionBudget %s selects no Deployment", name)
				}
			}
		})
	}
}

func TestProductionScalesEveryStageAndKeepsItAvailable(t *testing.T) {
	r := render(t, "overlays/production")
	for name, d := range r.deployments {
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("%s: production runs at least 2 replicas", name)
		}
		if _, ok := r.hpas[name]; !ok {
			t.Errorf("%s has no HPA", name)
		}
		if _, ok := r.pdbs[name]; !ok {
			t.Errorf("%s has no PodDisruptionBudget", name)
		}
	}
	for _, stage := range []string{"ragline-retrieval", "ragline-reranker"} {
		found := false
		for _, m := range r.hpas[stage].Spec.Metrics {
			found = found || (m.Type == autoscalingv2.PodsMetricSourceType && m.Pods.Metric.Name == "ragline_grpc_server_in_flight")
		}
		if !found {
			t.Errorf("%s: no HPA metric on calls in flight", stage)
		}
	}
	dev := render(t, "overlays/dev")
	for name, d := range dev.deployments {
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			t.Errorf("dev %s: want 1 replica", name)
		}
	}
}

func checkDeployment(t *testing.T, name string, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("%s: pods must run as non-root", name)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: want one container, got %d", name, len(pod.Containers))
	}
	c := pod.Containers[0]
	image := c.Image
	if !strings.Contains(image, ":") || strings.HasSuffix(image, ":latest") {
		t.Errorf("%s: image %q must carry an explicit tag", name, image)
	}
	if c.ReadinessProbe == nil || c.LivenessProbe == nil {
		t.Errorf("%s: readiness and liveness probes are required", name)
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("%s: the root filesystem must be read-only", name)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: CPU requests and memory limits are required", name)
	}
	if !mountsTmp(c) {
		t.Errorf("%s: /tmp must be a writable volume (the cache folder lives there)", name)
	}
	if !selectsADeployment(d.Spec.Selector.MatchLabels, map[string]*appsv1.Deployment{name: d}) {
		t.Errorf("%s: its selector does not match its own pods", name)
	}
}

func mountsTmp(c corev1.Container) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/tmp" && !m.ReadOnly {
			return true
		}
	}
	return false
}

func selectsADeployment(selector map[string]string, deployments map[string]*appsv1.Deployment) bool {
	for _, d := range deployments {
		labels := d.Spec.Template.Labels
		matches := len(selector) > 0
		for k, v := range selector {
			matches = matches && labels[k] == v
		}
		if matches {
			return true
		}
	}
	return false
}
