package printers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// row converts one object and returns its cells keyed by lower-cased column name.
func row(t *testing.T, p Printer, obj runtime.Object) map[string]any {
	t.Helper()
	tbl, err := p.ConvertToTable(context.Background(), obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tbl.Rows) != 1 {
		t.Fatalf("rows = %d, want 1", len(tbl.Rows))
	}
	cells := map[string]any{}
	for i, c := range tbl.ColumnDefinitions {
		cells[strings.ToLower(c.Name)] = tbl.Rows[0].Cells[i]
	}
	return cells
}

func ago(d time.Duration) metav1.Time { return metav1.NewTime(time.Now().Add(-d)) }

func running(ready bool, restarts int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Ready: ready, RestartCount: restarts,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func waiting(reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func terminated(reason string, code int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code}}}
}

func TestPodRow(t *testing.T) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(30*time.Minute + 10*time.Second)},
		Spec: corev1.PodSpec{
			NodeName:       "node-1",
			Containers:     []corev1.Container{{Name: "a"}, {Name: "b"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: "example.com/dns"}},
		},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			PodIP:             "10.244.0.7",
			ContainerStatuses: []corev1.ContainerStatus{running(true, 1), running(false, 2)},
			Conditions:        []corev1.PodCondition{{Type: "example.com/lb", Status: corev1.ConditionTrue}, {Type: "example.com/dns", Status: corev1.ConditionFalse}},
		},
	}
	got := row(t, Pods, p)
	want := map[string]any{
		"name": "web", "ready": "1/2", "status": "Running", "restarts": "3", "age": "30m",
		"ip": "10.244.0.7", "node": "node-1", "nominated node": "<none>", "readiness gates": "1/2",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("columns = %v", got)
	}

	bare := row(t, Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}})
	for k, v := range map[string]any{"ready": "0/1", "status": "Pending", "restarts": "0", "age": "<unknown>",
		"ip": "<none>", "node": "<none>", "readiness gates": "<none>"} {
		if bare[k] != v {
			t.Errorf("bare pod %s = %#v, want %#v", k, bare[k], v)
		}
	}
}

func TestPodStatus(t *testing.T) {
	initSpec := func(names ...string) []corev1.Container {
		var cs []corev1.Container
		for _, n := range names {
			cs = append(cs, corev1.Container{Name: n})
		}
		return cs
	}
	named := func(name string, cs corev1.ContainerStatus) corev1.ContainerStatus { cs.Name = name; return cs }
	initialized := []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want string
	}{
		{name: "phase", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{running(true, 0)}}}, want: "Running"},
		{name: "pod reason", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}, want: "Evicted"},
		{name: "waiting reason", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{running(true, 0), waiting("CrashLoopBackOff")}}}, want: "CrashLoopBackOff"},
		{name: "first container wins", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{waiting("ErrImagePull"), waiting("ContainerCreating")}}}, want: "ErrImagePull"},
		{name: "waiting without reason keeps phase", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{waiting("")}}}, want: "Pending"},
		{name: "terminated reason", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded,
			ContainerStatuses: []corev1.ContainerStatus{terminated("Completed", 0)}}}, want: "Completed"},
		{name: "OOMKilled", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{terminated("OOMKilled", 137)}}}, want: "OOMKilled"},
		{name: "terminating", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.Now())},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{waiting("CrashLoopBackOff")}}},
			want: "Terminating"},
		{name: "init waiting", pod: corev1.Pod{Spec: corev1.PodSpec{InitContainers: initSpec("i")}, Status: corev1.PodStatus{
			Phase:                 corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{named("i", waiting("ImagePullBackOff"))},
			ContainerStatuses:     []corev1.ContainerStatus{waiting("PodInitializing")}}}, want: "Init:ImagePullBackOff"},
		{name: "init crash looping", pod: corev1.Pod{Spec: corev1.PodSpec{InitContainers: initSpec("i")}, Status: corev1.PodStatus{
			Phase:                 corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{named("i", waiting("CrashLoopBackOff"))},
			ContainerStatuses:     []corev1.ContainerStatus{waiting("PodInitializing")}}}, want: "Init:CrashLoopBackOff"},
		{name: "init running", pod: corev1.Pod{Spec: corev1.PodSpec{InitContainers: initSpec("i")}, Status: corev1.PodStatus{
			Phase:                 corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{named("i", running(false, 0))},
			ContainerStatuses:     []corev1.ContainerStatus{waiting("PodInitializing")}}}, want: "Init:0/1"},
		{name: "second init running", pod: corev1.Pod{Spec: corev1.PodSpec{InitContainers: initSpec("i1", "i2")}, Status: corev1.PodStatus{
			Phase:                 corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{named("i1", terminated("Completed", 0)), named("i2", running(false, 0))},
			ContainerStatuses:     []corev1.ContainerStatus{waiting("PodInitializing")}}}, want: "Init:1/2"},
		{name: "first failing init wins", pod: corev1.Pod{Spec: corev1.PodSpec{InitContainers: initSpec("i1", "i2")}, Status: corev1.PodStatus{
			Phase:                 corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{named("i1", terminated("Error", 1)), named("i2", waiting("PodInitializing"))}}},
			want: "Init:Error"},
		{name: "init exit code without reason", pod: corev1.Pod{Spec: corev1.PodSpec{InitContainers: initSpec("i")}, Status: corev1.PodStatus{
			Phase:                 corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{named("i", terminated("", 2))}}}, want: "Init:ExitCode:2"},
		{name: "init done", pod: corev1.Pod{Spec: corev1.PodSpec{InitContainers: initSpec("i")}, Status: corev1.PodStatus{
			Phase:                 corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{named("i", terminated("Completed", 0))},
			ContainerStatuses:     []corev1.ContainerStatus{waiting("ContainerCreating")}}}, want: "ContainerCreating"},
		{name: "started sidecar does not block", pod: corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{
			{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}}, Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{func() corev1.ContainerStatus {
				cs := named("proxy", running(true, 0))
				cs.Started = ptr.To(true)
				return cs
			}()},
			ContainerStatuses: []corev1.ContainerStatus{running(true, 0)}}}, want: "Running"},
		{name: "unstarted sidecar blocks", pod: corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{
			{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}}, Status: corev1.PodStatus{
			Phase:                 corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{named("proxy", running(false, 0))},
			ContainerStatuses:     []corev1.ContainerStatus{waiting("PodInitializing")}}}, want: "Init:0/1"},
		{name: "initialized pod with a restarted init container", pod: corev1.Pod{Spec: corev1.PodSpec{InitContainers: initSpec("i")}, Status: corev1.PodStatus{
			Phase: corev1.PodRunning, Conditions: initialized,
			InitContainerStatuses: []corev1.ContainerStatus{named("i", waiting("ContainerCreating"))},
			ContainerStatuses:     []corev1.ContainerStatus{waiting("CrashLoopBackOff")}}}, want: "CrashLoopBackOff"},
		{name: "terminating while initializing", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.Now())},
			Spec: corev1.PodSpec{InitContainers: initSpec("i")}, Status: corev1.PodStatus{
				Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{named("i", waiting("ErrImagePull"))}}},
			want: "Terminating"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodStatus(&tc.pod); got != tc.want {
				t.Errorf("PodStatus = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNodeRow(t *testing.T) {
	ready := func(s corev1.ConditionStatus) []corev1.NodeCondition {
		return []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: s}}
	}
	for _, tc := range []struct {
		name          string
		node          corev1.Node
		status, roles string
	}{
		{name: "ready", node: corev1.Node{Status: corev1.NodeStatus{Conditions: ready(corev1.ConditionTrue)}}, status: "Ready", roles: "<none>"},
		{name: "not ready", node: corev1.Node{Status: corev1.NodeStatus{Conditions: ready(corev1.ConditionFalse)}}, status: "NotReady", roles: "<none>"},
		{name: "unknown ready", node: corev1.Node{Status: corev1.NodeStatus{Conditions: ready(corev1.ConditionUnknown)}}, status: "NotReady", roles: "<none>"},
		{name: "no conditions", node: corev1.Node{}, status: "Unknown", roles: "<none>"},
		{name: "cordoned", node: corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: ready(corev1.ConditionTrue)}},
			status: "Ready,SchedulingDisabled", roles: "<none>"},
		{name: "cordoned not ready", node: corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: ready(corev1.ConditionFalse)}},
			status: "NotReady,SchedulingDisabled", roles: "<none>"},
		{name: "roles", node: corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/": "x",
			"kubernetes.io/hostname": "n1", "node-role.example.com/gpu": ""}},
			Status: corev1.NodeStatus{Conditions: ready(corev1.ConditionTrue)}},
			status: "Ready", roles: "control-plane,worker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.node.Name = "n1"
			got := row(t, Nodes, &tc.node)
			if got["status"] != tc.status || got["roles"] != tc.roles {
				t.Errorf("status %q roles %q, want %q %q", got["status"], got["roles"], tc.status, tc.roles)
			}
		})
	}

	got := row(t, Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "n1"}, {Type: corev1.NodeInternalIP, Address: "192.168.1.10"}},
		NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.0", OSImage: "Debian GNU/Linux 13", KernelVersion: "6.12.0",
			ContainerRuntimeVersion: "containerd://2.1.0"},
	}})
	for k, v := range map[string]any{"name": "n1", "version": "v1.37.0", "internal-ip": "192.168.1.10", "external-ip": "<none>",
		"os-image": "Debian GNU/Linux 13", "kernel-version": "6.12.0", "container-runtime": "containerd://2.1.0"} {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
}

func TestServiceRow(t *testing.T) {
	tcp := func(port, nodePort int32) corev1.ServicePort {
		return corev1.ServicePort{Port: port, NodePort: nodePort, Protocol: corev1.ProtocolTCP}
	}
	for _, tc := range []struct {
		name                       string
		spec                       corev1.ServiceSpec
		status                     corev1.ServiceStatus
		clusterIP, external, ports string
		selector                   string
	}{
		{name: "ClusterIP", spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10",
			Ports: []corev1.ServicePort{tcp(80, 0)}, Selector: map[string]string{"app": "web"}},
			clusterIP: "10.96.0.10", external: "<none>", ports: "80/TCP", selector: "app=web"},
		{name: "two ports", spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10",
			Ports: []corev1.ServicePort{tcp(80, 0), {Port: 53, Protocol: corev1.ProtocolUDP}}},
			clusterIP: "10.96.0.10", external: "<none>", ports: "80/TCP,53/UDP", selector: "<none>"},
		{name: "headless", spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone},
			clusterIP: "None", external: "<none>", ports: "<none>", selector: "<none>"},
		{name: "external IPs", spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10",
			ExternalIPs: []string{"1.2.3.4", "1.2.3.5"}, Ports: []corev1.ServicePort{tcp(80, 0)}},
			clusterIP: "10.96.0.10", external: "1.2.3.4,1.2.3.5", ports: "80/TCP", selector: "<none>"},
		{name: "NodePort", spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.11",
			Ports: []corev1.ServicePort{tcp(80, 30080)}},
			clusterIP: "10.96.0.11", external: "<none>", ports: "80:30080/TCP", selector: "<none>"},
		{name: "pending LoadBalancer", spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.12",
			Ports: []corev1.ServicePort{tcp(443, 31443)}},
			clusterIP: "10.96.0.12", external: "<pending>", ports: "443:31443/TCP", selector: "<none>"},
		{name: "LoadBalancer with ingress", spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.12",
			Ports: []corev1.ServicePort{tcp(443, 31443)}},
			status:    corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}, {Hostname: "lb.example.com"}}}},
			clusterIP: "10.96.0.12", external: "203.0.113.7,lb.example.com", ports: "443:31443/TCP", selector: "<none>"},
		{name: "ExternalName", spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"},
			clusterIP: "<none>", external: "db.example.com", ports: "<none>", selector: "<none>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := row(t, Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"}, Spec: tc.spec, Status: tc.status})
			want := map[string]any{"name": "svc", "type": string(tc.spec.Type), "cluster-ip": tc.clusterIP,
				"external-ip": tc.external, "port(s)": tc.ports, "selector": tc.selector, "age": "<unknown>"}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %#v, want %#v", k, got[k], v)
				}
			}
		})
	}
}

func TestWorkloadRows(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers:   []corev1.Container{{Name: "web", Image: "nginx:1.27"}, {Name: "log", Image: "fluent-bit"}},
		NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
	}}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}

	d := row(t, Deployments, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(3 * time.Hour)},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: sel, Template: tmpl},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 1}})
	for k, v := range map[string]any{"name": "web", "ready": "2/3", "up-to-date": int64(3), "available": int64(1), "age": "3h",
		"containers": "web,log", "images": "nginx:1.27,fluent-bit", "selector": "app=web"} {
		if d[k] != v {
			t.Errorf("deployment %s = %#v, want %#v", k, d[k], v)
		}
	}
	nilReplicas := row(t, Deployments, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
	if nilReplicas["ready"] != "0/0" || nilReplicas["containers"] != "" {
		t.Errorf("deployment without replicas/containers: %v", nilReplicas)
	}

	rs := row(t, ReplicaSets, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-5d4f"},
		Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: sel, Template: tmpl},
		Status: appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 1}})
	for k, v := range map[string]any{"desired": int64(3), "current": int64(2), "ready": int64(1), "images": "nginx:1.27,fluent-bit"} {
		if rs[k] != v {
			t.Errorf("replicaset %s = %#v, want %#v", k, rs[k], v)
		}
	}

	ds := row(t, DaemonSets, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 4, CurrentNumberScheduled: 3, NumberReady: 2,
			UpdatedNumberScheduled: 1, NumberAvailable: 2}})
	for k, v := range map[string]any{"desired": int64(4), "current": int64(3), "ready": int64(2), "up-to-date": int64(1),
		"available": int64(2), "node selector": "kubernetes.io/os=linux", "selector": "app=web"} {
		if ds[k] != v {
			t.Errorf("daemonset %s = %#v, want %#v", k, ds[k], v)
		}
	}
}

func TestEventColumns(t *testing.T) {
	for name, p := range map[string]Printer{"Events": Events, "EventsV1": EventsV1} {
		var all, narrow []string
		for _, c := range p.columns {
			all = append(all, strings.ToUpper(c.Name))
			if c.Priority == 0 {
				narrow = append(narrow, strings.ToUpper(c.Name))
			}
		}
		if got := strings.Join(narrow, ","); got != "LAST SEEN,TYPE,REASON,OBJECT,MESSAGE" {
			t.Errorf("%s: default columns = %s", name, got)
		}
		if got := strings.Join(all, ","); got != "LAST SEEN,TYPE,REASON,OBJECT,SUBOBJECT,SOURCE,MESSAGE,FIRST SEEN,COUNT,NAME" {
			t.Errorf("%s: all columns = %s", name, got)
		}
		if last := p.columns[len(p.columns)-1]; last.Name != "Name" || last.Priority != 1 {
			t.Errorf("%s: last column = %+v, want a wide Name", name, last)
		}
	}
}

func TestEventRows(t *testing.T) {
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.17a", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{nginx}"},
		Reason:         "BackOff", Message: "Back-off restarting failed container\n", Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: ago(40 * time.Minute), LastTimestamp: ago(15 * time.Minute), Count: 7,
	}
	got := row(t, Events, e)
	for k, v := range map[string]any{"last seen": "15m", "type": "Warning", "reason": "BackOff", "object": "pod/web",
		"subobject": "spec.containers{nginx}", "source": "kubelet, node-1", "message": "Back-off restarting failed container",
		"first seen": "40m", "count": int64(7), "name": "web.17a"} {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}

	// A new-style event: only eventTime, a series and a reporting controller.
	series := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "n.1"},
		InvolvedObject:      corev1.ObjectReference{Kind: "Node", Name: "node-1"},
		EventTime:           metav1.NewMicroTime(time.Now().Add(-50 * time.Minute)),
		Series:              &corev1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(time.Now().Add(-30 * time.Minute))},
		ReportingController: "skiff-controller", Type: corev1.EventTypeNormal, Reason: "Ready",
	}
	got = row(t, Events, series)
	for k, v := range map[string]any{"last seen": "30m", "first seen": "50m", "count": int64(4), "source": "skiff-controller", "object": "node/node-1"} {
		if got[k] != v {
			t.Errorf("series event %s = %#v, want %#v", k, got[k], v)
		}
	}

	once := row(t, Events, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "x", CreationTimestamp: ago(25 * time.Minute)}})
	if once["count"] != int64(1) || once["last seen"] != "25m" {
		t.Errorf("count %v last seen %v, want 1 and the creation time", once["count"], once["last seen"])
	}

	v1 := row(t, EventsV1, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "web.17b"},
		EventTime:  metav1.NewMicroTime(time.Now().Add(-70 * time.Minute)),
		Regarding:  corev1.ObjectReference{Kind: "Deployment", Name: "web"}, Note: "Scaled up", Reason: "ScalingReplicaSet",
		Type: corev1.EventTypeNormal, ReportingController: "deployment-controller",
		Series: &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(time.Now().Add(-45 * time.Minute))},
	})
	for k, v := range map[string]any{"last seen": "45m", "first seen": "70m", "object": "deployment/web", "message": "Scaled up",
		"reason": "ScalingReplicaSet", "source": "deployment-controller", "count": int64(2), "name": "web.17b"} {
		if v1[k] != v {
			t.Errorf("events/v1 %s = %#v, want %#v", k, v1[k], v)
		}
	}
}

func TestOtherRows(t *testing.T) {
	ports := []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}, {Port: ptr.To[int32](443)}, {}}
	es := row(t, EndpointSlices, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-x"}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports: ports, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1", "10.0.0.2"}}, {Addresses: []string{"10.0.0.3"}}, {Addresses: []string{"10.0.0.4", "10.0.0.5"}}}})
	if es["addresstype"] != "IPv4" || es["ports"] != "80,443" || es["endpoints"] != "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more..." {
		t.Errorf("endpointslice row = %v", es)
	}
	empty := row(t, EndpointSlices, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "e"}})
	if empty["ports"] != "<unset>" || empty["endpoints"] != "<unset>" {
		t.Errorf("empty endpointslice row = %v", empty)
	}

	ep := row(t, Endpoints, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Subsets: []corev1.EndpointSubset{
		{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []corev1.EndpointPort{{Port: 80}, {Port: 443}}},
		{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.2"}}},
	}})
	if ep["endpoints"] != "10.0.0.1:80,10.0.0.1:443,10.0.0.2" {
		t.Errorf("endpoints row = %v", ep)
	}

	if l := row(t, Leases, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1")}}); l["holder"] != "n1" {
		t.Errorf("lease row = %v", l)
	}
	if ns := row(t, Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}); ns["status"] != "Terminating" {
		t.Errorf("namespace row = %v", ns)
	}
	tmpl := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "ia"}, {Name: "b", Image: "ib"}}}}}
	if r := row(t, PodTemplates, tmpl); r["containers"] != "a,b" || r["images"] != "ia,ib" || r["pod labels"] != "app=web" {
		t.Errorf("podtemplate row %v", r)
	}
	if cm := row(t, ConfigMaps, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": "", "b": ""}, BinaryData: map[string][]byte{"c": nil}}); cm["data"] != int64(3) {
		t.Errorf("configmap row = %v", cm)
	}
	if s := row(t, Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}}); s["type"] != "kubernetes.io/tls" || s["data"] != int64(2) {
		t.Errorf("secret row = %v", s)
	}
	if sa := row(t, ServiceAccounts, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); sa["secrets"] != int64(0) {
		t.Errorf("serviceaccount row = %v", sa)
	}
	np := row(t, NetworkPolicies, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}})
	if np["pod-selector"] != "app=web" {
		t.Errorf("networkpolicy row = %v", np)
	}
	if all := row(t, NetworkPolicies, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "n"}}); all["pod-selector"] != "<none>" {
		t.Errorf("empty pod selector = %v", all["pod-selector"])
	}
}

// every printer of resources.go with a representative object.
var every = []struct {
	name    string
	printer Printer
	obj     runtime.Object
	list    runtime.Object
}{
	{"Pods", Pods, &corev1.Pod{}, &corev1.PodList{}},
	{"Nodes", Nodes, &corev1.Node{}, &corev1.NodeList{}},
	{"Services", Services, &corev1.Service{}, &corev1.ServiceList{}},
	{"Deployments", Deployments, &appsv1.Deployment{}, &appsv1.DeploymentList{}},
	{"ReplicaSets", ReplicaSets, &appsv1.ReplicaSet{}, &appsv1.ReplicaSetList{}},
	{"DaemonSets", DaemonSets, &appsv1.DaemonSet{}, &appsv1.DaemonSetList{}},
	{"EndpointSlices", EndpointSlices, &discoveryv1.EndpointSlice{}, &discoveryv1.EndpointSliceList{}},
	{"Endpoints", Endpoints, &corev1.Endpoints{}, &corev1.EndpointsList{}},
	{"Leases", Leases, &coordinationv1.Lease{}, &coordinationv1.LeaseList{}},
	{"Events", Events, &corev1.Event{}, &corev1.EventList{}},
	{"EventsV1", EventsV1, &eventsv1.Event{}, &eventsv1.EventList{}},
	{"Namespaces", Namespaces, &corev1.Namespace{}, &corev1.NamespaceList{}},
	{"ConfigMaps", ConfigMaps, &corev1.ConfigMap{}, &corev1.ConfigMapList{}},
	{"Secrets", Secrets, &corev1.Secret{}, &corev1.SecretList{}},
	{"PodTemplates", PodTemplates, &corev1.PodTemplate{}, &corev1.PodTemplateList{}},
	{"ServiceAccounts", ServiceAccounts, &corev1.ServiceAccount{}, &corev1.ServiceAccountList{}},
	{"NetworkPolicies", NetworkPolicies, &networkingv1.NetworkPolicy{}, &networkingv1.NetworkPolicyList{}},
	{"ServiceCIDRs", ServiceCIDRs, &networkingv1.ServiceCIDR{}, &networkingv1.ServiceCIDRList{}},
	{"CertificateSigningRequests", CertificateSigningRequests, &certificatesv1.CertificateSigningRequest{}, &certificatesv1.CertificateSigningRequestList{}},
	{"Roles", Roles, &rbacv1.Role{}, &rbacv1.RoleList{}},
	{"ClusterRoles", Roles, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleList{}},
	{"RoleBindings", RoleBindings, &rbacv1.RoleBinding{}, &rbacv1.RoleBindingList{}},
	{"ClusterRoleBindings", ClusterRoleBindings, &rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRoleBindingList{}},
}

func TestRBACRows(t *testing.T) {
	b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "Group", Name: "devs"}, {Kind: "ServiceAccount", Namespace: "ns", Name: "app"}, {Kind: "User", Name: "bob"}}}
	r := row(t, RoleBindings, b)
	if r["role"] != "ClusterRole/view" || r["users"] != "alice, bob" || r["groups"] != "devs" || r["serviceaccounts"] != "ns/app" {
		t.Errorf("rolebinding row = %v", r)
	}
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if r := row(t, Roles, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view", CreationTimestamp: created}}); r["created at"] != "2026-01-02T03:04:05Z" {
		t.Errorf("clusterrole row = %v", r)
	}
}

func TestCSRCondition(t *testing.T) {
	for _, tc := range []struct {
		conds []certificatesv1.CertificateSigningRequestCondition
		cert  []byte
		want  string
	}{
		{nil, nil, "Pending"},
		{[]certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}, nil, "Approved"},
		{[]certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}, []byte("x"), "Approved,Issued"},
		{[]certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue}}, nil, "Denied"},
		{[]certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue},
			{Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue}}, nil, "Approved,Failed"},
		{[]certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateFailed, Status: corev1.ConditionFalse}}, nil, "Pending"},
	} {
		csr := &certificatesv1.CertificateSigningRequest{Status: certificatesv1.CertificateSigningRequestStatus{Conditions: tc.conds, Certificate: tc.cert}}
		if got := CSRCondition(csr); got != tc.want {
			t.Errorf("CSRCondition(%v, cert=%v) = %q, want %q", tc.conds, tc.cert != nil, got, tc.want)
		}
	}
	r := row(t, CertificateSigningRequests, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "node-csr-a"},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "kubernetes.io/kubelet-serving", Username: "system:node:n1", ExpirationSeconds: ptr.To[int32](3600)}})
	if r["signername"] != "kubernetes.io/kubelet-serving" || r["requestor"] != "system:node:n1" || r["requestedduration"] != "60m" || r["condition"] != "Pending" {
		t.Errorf("csr row = %v", r)
	}
}

func TestEveryPrinterShape(t *testing.T) {
	for _, tc := range every {
		t.Run(tc.name, func(t *testing.T) {
			tbl, err := tc.printer.ConvertToTable(context.Background(), tc.obj, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(tbl.Rows) != 1 || len(tbl.Rows[0].Cells) != len(tbl.ColumnDefinitions) {
				t.Fatalf("%d rows, %d columns", len(tbl.Rows), len(tbl.ColumnDefinitions))
			}
			names := map[string]bool{}
			for i, c := range tbl.ColumnDefinitions {
				if names[c.Name] {
					t.Errorf("duplicate column %s", c.Name)
				}
				names[c.Name] = true
				cell := tbl.Rows[0].Cells[i]
				switch c.Type {
				case "string":
					if _, ok := cell.(string); !ok {
						t.Errorf("column %s is a string column but its cell is %T", c.Name, cell)
					}
				case "integer":
					if _, ok := cell.(int64); !ok {
						t.Errorf("column %s is an integer column but its cell is %T", c.Name, cell)
					}
				case "date": // RFC 3339, as upstream's CREATED AT of roles
					if s, ok := cell.(string); !ok {
						t.Errorf("column %s is a date column but its cell is %T", c.Name, cell)
					} else if _, err := time.Parse(time.RFC3339, s); err != nil {
						t.Errorf("column %s: %v", c.Name, err)
					}
				default:
					t.Errorf("column %s has type %q", c.Name, c.Type)
				}
				if c.Priority != 0 && c.Priority != 1 {
					t.Errorf("column %s priority %d", c.Name, c.Priority)
				}
			}
			// Upstream prints no AGE for PodTemplates, CREATED AT for roles.
			if !names["Name"] || !names["Age"] && !names["Last Seen"] && !names["Created At"] && tc.name != "PodTemplates" {
				t.Errorf("columns %v lack Name or Age", names)
			}
			if tc.name != "Events" && tc.name != "EventsV1" {
				if first := tbl.ColumnDefinitions[0]; first.Name != "Name" || first.Format != "name" || first.Priority != 0 {
					t.Errorf("first column = %+v, want NAME", first)
				}
			}
			if tbl.Rows[0].Object.Object != tc.obj {
				t.Error("row does not carry the object")
			}
		})
	}
}

func TestLists(t *testing.T) {
	for _, tc := range every {
		t.Run(tc.name, func(t *testing.T) {
			tbl, err := tc.printer.ConvertToTable(context.Background(), tc.list, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(tbl.Rows) != 0 || len(tbl.ColumnDefinitions) == 0 {
				t.Errorf("empty list: %d rows, %d columns", len(tbl.Rows), len(tbl.ColumnDefinitions))
			}
		})
	}

	list := &corev1.PodList{
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "token-abc", RemainingItemCount: ptr.To[int64](7)},
	}
	for i := range 3 {
		list.Items = append(list.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), ResourceVersion: "40"}})
	}
	tbl, err := Pods.ConvertToTable(context.Background(), list, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tbl.Rows) != 3 {
		t.Fatalf("rows = %d, want 3", len(tbl.Rows))
	}
	for i, r := range tbl.Rows {
		if r.Cells[0] != fmt.Sprintf("p%d", i) {
			t.Errorf("row %d name = %v", i, r.Cells[0])
		}
		if p, ok := r.Object.Object.(*corev1.Pod); !ok || p.Name != fmt.Sprintf("p%d", i) {
			t.Errorf("row %d object = %#v", i, r.Object.Object)
		}
	}
	if tbl.ResourceVersion != "42" || tbl.Continue != "token-abc" || tbl.RemainingItemCount == nil || *tbl.RemainingItemCount != 7 {
		t.Errorf("list meta = %q %q %v", tbl.ResourceVersion, tbl.Continue, tbl.RemainingItemCount)
	}

	single, err := Pods.ConvertToTable(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "9"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if single.ResourceVersion != "9" || single.Continue != "" {
		t.Errorf("single object meta = %q %q", single.ResourceVersion, single.Continue)
	}
}

func TestNoHeaders(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	for _, tc := range []struct {
		name    string
		opts    runtime.Object
		headers bool
	}{
		{"nil options", nil, true},
		{"default options", &metav1.TableOptions{}, true},
		{"noHeaders", &metav1.TableOptions{NoHeaders: true}, false},
		{"other options", &metav1.GetOptions{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl, err := Pods.ConvertToTable(context.Background(), pod, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(tbl.ColumnDefinitions) > 0; got != tc.headers {
				t.Errorf("headers = %v, want %v", got, tc.headers)
			}
			if len(tbl.Rows) != 1 || len(tbl.Rows[0].Cells) != len(Pods.columns) {
				t.Errorf("rows must not depend on headers: %+v", tbl.Rows)
			}
		})
	}
}

func TestCellCountMismatch(t *testing.T) {
	p := Custom(func(runtime.Object) []any { return []any{"only one"} }, Column{Name: "A"}, Column{Name: "B"})
	if _, err := p.ConvertToTable(context.Background(), &corev1.Pod{}, nil); err == nil {
		t.Error("a row with fewer cells than columns must be an error")
	}
	if _, err := p.ConvertToTable(context.Background(), &corev1.PodList{Items: []corev1.Pod{{}}}, nil); err == nil {
		t.Error("a list row with fewer cells than columns must be an error")
	}
}

func TestNewAndCustomColumns(t *testing.T) {
	p := New(func(runtime.Object) []any { return []any{int64(1), "x"} },
		Column{Name: "Count", Type: "integer"}, Column{Name: "Extra", Wide: true, Format: "f", Description: "d"})
	want := []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Count", Type: "integer"},
		{Name: "Extra", Type: "string", Format: "f", Description: "d", Priority: 1},
	}
	if fmt.Sprint(p.columns) != fmt.Sprint(want) {
		t.Errorf("columns = %+v\nwant %+v", p.columns, want)
	}
	tbl, err := p.ConvertToTable(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tbl.Rows[0].Cells) != fmt.Sprint([]any{"cm", int64(1), "x"}) {
		t.Errorf("cells = %v", tbl.Rows[0].Cells)
	}
}

func TestAge(t *testing.T) {
	for _, tc := range []struct {
		ts   metav1.Time
		want string
	}{
		{metav1.Time{}, "<unknown>"},
		{ago(10 * time.Second), "10s"},
		{ago(5*time.Minute + 10*time.Second), "5m10s"},
		{ago(26 * time.Hour), "26h"},
		{ago(3*24*time.Hour + 5*time.Hour), "3d5h"},
	} {
		if got := Age(tc.ts); got != tc.want {
			t.Errorf("Age(%v) = %q, want %q", tc.ts, got, tc.want)
		}
	}
}
