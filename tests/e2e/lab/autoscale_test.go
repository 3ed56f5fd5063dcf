package lab

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// autoscale checks metrics.k8s.io end to end with the real kubectl: `kubectl top` shows the
// nodes' and a pod's real usage (read from the agents' CRI stats by the API server, no
// metrics-server), and `kubectl autoscale` scales a Deployment whose pod burns twice its CPU
// request up to its maximum.
func (l *lab) autoscale() {
	t := l.t
	l.apply(`apiVersion: apps/v1
kind: Deployment
metadata: {name: burner}
spec:
  replicas: 1
  selector: {matchLabels: {app: burner}}
  template:
    metadata: {labels: {app: burner}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: c
        image: localhost/skiff/netutil:1
        command: [netutil, burn, "200"]
        resources: {requests: {cpu: 100m}}
`)
	defer l.kubectl("delete", "deployment", "burner", "--wait=false")

	// Two scrapes a resolution (15 s) apart make the first rate.
	row := regexp.MustCompile(`(?m)^burner-\S+\s+(\d+)m\s+(\d+)Mi\s*$`)
	framework.Eventually(t, 90*time.Second, "kubectl top pod shows the burner's CPU", func() (bool, string) {
		out, err := l.kubectlErr("top", "pod", "-l", "app=burner", "--no-headers")
		m := row.FindStringSubmatch(out)
		if err != nil || m == nil {
			return false, out
		}
		milli, _ := strconv.Atoi(m[1])
		return milli >= 100 && milli <= 600, out // 200m burnt; wide bounds for a shared machine
	})
	framework.Eventually(t, 60*time.Second, "kubectl top nodes lists every node", func() (bool, string) {
		out, err := l.kubectlErr("top", "nodes", "--no-headers")
		if err != nil {
			return false, out
		}
		nodes, _ := l.client.CoreV1().Nodes().List(l.ctx, metav1.ListOptions{})
		for _, n := range nodes.Items {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(n.Name) + `\s+[1-9]\d*m\s+\d+%\s+\d+Mi\s+\d+%`).MatchString(out) {
				return false, out
			}
		}
		return true, out
	})

	l.kubectl("autoscale", "deployment", "burner", "--cpu-percent=50", "--min=1", "--max=3")
	defer l.kubectl("delete", "hpa", "burner")
	hpa := regexp.MustCompile(`burner\s+Deployment/burner\s+cpu: \d+%/50%\s+1\s+3\s+3\s`)
	framework.Eventually(t, 2*time.Minute, "the HPA scales burner to 3", func() (bool, string) {
		d, err := l.client.AppsV1().Deployments("default").Get(l.ctx, "burner", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		out := l.kubectl("get", "hpa", "burner")
		return *d.Spec.Replicas == 3 && hpa.MatchString(out), fmt.Sprintf("deployment replicas %d\n%s", *d.Spec.Replicas, out)
	})
	if events := l.kubectl("get", "events", "--field-selector", "involvedObject.kind=HorizontalPodAutoscaler,involvedObject.name=burner"); !strings.Contains(events, "SuccessfulRescale") {
		t.Errorf("no SuccessfulRescale event:\n%s", events)
	}
}
