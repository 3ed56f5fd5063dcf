package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func spec(container, leaf, state, msg string) ginkgoSpec {
	s := ginkgoSpec{ContainerHierarchyTexts: []string{container}, LeafNodeType: "It", LeafNodeText: leaf, State: state, RunTime: time.Second}
	if msg != "" {
		s.Failure = &struct {
			Message        string
			ForwardedPanic string `json:",omitempty"`
		}{Message: msg}
	}
	return s
}

// TestMergeEverySelectedSpecOnce: a spec lost with a dead process is NotReported until a
// retry reports it; a retry's skip of the specs it did not focus on changes nothing; suite
// nodes are not specs; every selected spec appears once, in order.
func TestMergeEverySelectedSpecOnce(t *testing.T) {
	dry := []ginkgoReport{{SpecReports: []ginkgoSpec{
		spec("[sig-apps] Deployment", "should run [Conformance]", "passed", ""),
		spec("[sig-apps] Job", "should complete [Conformance]", "passed", ""),
		spec("[sig-node] Pods", "should be updated [Conformance]", "passed", ""),
		spec("[sig-node] Pods", "should not be selected", "skipped", ""),
		{LeafNodeType: "SynchronizedBeforeSuite", State: "passed"},
	}}}
	selected := Selected(dry)
	if len(selected) != 3 {
		t.Fatalf("selected %v", selected)
	}
	run1 := []ginkgoReport{{SpecReports: []ginkgoSpec{
		spec("[sig-apps] Deployment", "should run [Conformance]", "passed", ""),
		spec("[sig-apps] Job", "should complete [Conformance]", "failed",
			"\n  the server could not find the requested resource (post jobs.batch)\n  more detail"),
		{LeafNodeType: "SynchronizedBeforeSuite", State: "failed"},
	}}}
	missing := Missing(selected, run1)
	if len(missing) != 1 || missing[0] != "[sig-node] Pods should be updated [Conformance]" {
		t.Fatalf("missing %v", missing)
	}
	got := Merge(selected, run1)
	if got[2].State != NotReported || got[2].Issue == "" || got[2].Cause == "" {
		t.Fatalf("lost spec: %+v", got[2])
	}
	run2 := []ginkgoReport{{SpecReports: []ginkgoSpec{
		spec("[sig-apps] Deployment", "should run [Conformance]", "skipped", ""),
		spec("[sig-node] Pods", "should be updated [Conformance]", "timedout", "timed out waiting"),
	}}}
	got = Merge(selected, run1, run2)
	want := []struct{ name, state, err, issue string }{
		{"[sig-apps] Deployment should run [Conformance]", Passed, "", ""},
		{"[sig-apps] Job should complete [Conformance]", Failed, "the server could not find the requested resource (post jobs.batch)", "#17 workloads and core APIs"},
		{"[sig-node] Pods should be updated [Conformance]", Failed, "timedout: timed out waiting", "#13 agent behaviour (node, volumes)"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results", len(got))
	}
	for i, w := range want {
		if g := got[i]; g.Name != w.name || g.State != w.state || g.Error != w.err || g.Issue != w.issue {
			t.Errorf("result %d = %+v, want %+v", i, g, w)
		}
	}
	if Missing(selected, run1, run2) != nil {
		t.Error("nothing should be missing after the retry")
	}
}

func TestCauseGroupsOneReason(t *testing.T) {
	a := Cause(`pods "pod-secrets-7d2c9f1a-4b3e-4c55-9a0e-1f2e3d4c5b6a" not found in namespace "secrets-3521" after 5m0s at 10.244.1.5:8080`)
	b := Cause(`pods "pod-secrets-0b2c9f1a-4b3e-4c55-9a0e-1f2e3d4c5b6b" not found in namespace "secrets-88" after 30s at 10.244.2.9:80`)
	if a != b {
		t.Fatalf("one reason, two causes:\n%s\n%s", a, b)
	}
	if c := Cause(`the server could not find the requested resource (post roles.rbac.authorization.k8s.io)`); c != `the server could not find the requested resource (post roles.rbac.authorization.k8s.io)` {
		t.Fatalf("a message without names changed: %s", c)
	}
	if Cause("expected 0755 to be 0777") == Cause("the server could not find the requested resource") {
		t.Fatal("two reasons, one cause")
	}
}

func TestOwner(t *testing.T) {
	for _, c := range []struct{ name, err, want string }{
		{"[sig-auth] ServiceAccounts should mount [Conformance]", "", "#14 authorization (RBAC)"},
		{"[sig-api-machinery] Garbage collector x", `the server could not find the requested resource (post roles.rbac.authorization.k8s.io)`, "#14 authorization (RBAC)"},
		{"[sig-network] DNS should provide DNS for services [Conformance]", "", "#16 DNS and LoadBalancer"},
		{"[sig-api-machinery] CustomResourceDefinition resources x", "", "#18 extensibility and admission"},
		{"[sig-apps] StatefulSet Basic x", "", "#17 workloads and core APIs"},
		{"[sig-storage] Downward API volume should provide cpu limit", "expected CPU_LIMIT=2", "#13 agent behaviour (node, volumes)"},
		{"[sig-cli] Kubectl client x", "exit status 1", "#11 harness (unassigned)"},
		{"[sig-node] Kubelet when scheduling a read only busybox container should not write to root filesystem [LinuxOnly] [Conformance]", "Timed out", "#13 agent behaviour (node, volumes)"},
		// An API that is not served belongs to the issue that serves it, a SIG's agent behaviour to 13.
		{"[sig-node] [DRA] CRUD Tests resource.k8s.io/v1 DeviceClass [Conformance]", "get resource API: the server could not find the requested resource", "#17 workloads and core APIs"},
		{"[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook should execute poststart exec hook properly [Conformance]", "Timed out", "#13 agent behaviour (node, volumes)"},
		{"[sig-auth] Projected ClusterTrustBundle x", "Error while creating ClusterTrustBundle", "unassigned: certificates.k8s.io ClusterTrustBundles and PodCertificateRequests (served since 2026-12-04; no issue owns them)"},
	} {
		if got := Owner(c.name, c.err); got != c.want {
			t.Errorf("Owner(%q, %q) = %q, want %q", c.name, c.err, got, c.want)
		}
	}
}

// TestWriteResults: totals per SIG add up, RESULTS.md groups failures by issue and cause
// with every failing spec, results.json and junit.xml read back.
func TestWriteResults(t *testing.T) {
	s := &Summary{Date: "2026-12-01", Commit: "abc", E2E: "v1.37.2", Procs: 6, Focus: `\[Conformance\]`, TotalSpecs: 9,
		Results: []Result{
			{Name: "[sig-apps] A [Conformance]", SIG: "sig-apps", State: Passed},
			{Name: "[sig-apps] B [Conformance]", SIG: "sig-apps", State: Failed, Error: `jobs "x-1" not found`, Cause: Cause(`jobs "x-1" not found`), Issue: "#17 workloads and core APIs"},
			{Name: "[sig-apps] C [Conformance]", SIG: "sig-apps", State: Failed, Error: `jobs "y-2" not found`, Cause: Cause(`jobs "y-2" not found`), Issue: "#17 workloads and core APIs"},
			{Name: "[sig-node] D [Conformance]", SIG: "sig-node", State: NotReported, Error: "no result", Cause: "no result", Issue: "#13 agent behaviour (node, volumes)"},
			{Name: "[sig-node] E [Conformance]", SIG: "sig-node", State: Skipped},
		}}
	Summarize(s)
	if s.Totals != (Totals{Selected: 5, Passed: 1, Failed: 2, Skipped: 1, NotReported: 1}) {
		t.Fatalf("totals %+v", s.Totals)
	}
	if len(s.SIGTotals) != 2 || s.SIGTotals[0].Name != "sig-apps" || s.SIGTotals[0].Failed != 2 || s.SIGTotals[1].NotReported != 1 {
		t.Fatalf("per SIG %+v", s.SIGTotals)
	}
	dir := t.TempDir()
	if err := writeResults(dir, s, dir); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
	for _, want := range []string{"**1 of 5 conformance specs pass (2 fail, 1 skipped, 1 not reported).**",
		"| sig-apps | 3 | 1 | 2 | 0 | 0 |", "### #17 workloads and core APIs", "**2 × `jobs \"NAME\" not found`**",
		"- [sig-apps] C [Conformance] — `jobs \"y-2\" not found`", "| #13 agent behaviour (node, volumes) | 1 |", "## Passing\n\n- [sig-apps] A [Conformance]"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("RESULTS.md lacks %q:\n%s", want, md)
		}
	}
	var back Summary
	b, _ := os.ReadFile(filepath.Join(dir, "results.json"))
	if err := json.Unmarshal(b, &back); err != nil || len(back.Results) != 5 || back.Totals != s.Totals {
		t.Fatalf("results.json: %v %+v", err, back.Totals)
	}
	var junit struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Cases    []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
		} `xml:"testcase"`
	}
	b, _ = os.ReadFile(filepath.Join(dir, "junit.xml"))
	if err := xml.Unmarshal(b, &junit); err != nil || junit.Tests != 5 || junit.Failures != 2 || junit.Errors != 1 || junit.Cases[1].Failure == nil {
		t.Fatalf("junit.xml: %v %+v", err, junit)
	}
}

func TestExactFocus(t *testing.T) {
	re := regexp.MustCompile(exactFocus([]string{"[sig-node] Pods should run [Conformance]", "[sig-apps] a.b (x)"}))
	for name, want := range map[string]bool{
		"[sig-node] Pods should run [Conformance]":                      true,
		"Kubernetes e2e suite [sig-node] Pods should run [Conformance]": true,
		"Kubernetes e2e suite [sig-apps] aXb (x)":                       false,
		"[sig-apps] a.b (x)":                                            true,
		"[sig-apps] aXb (x)":                                            false,
		"[sig-node] Pods should run [Conformance] again":                false,
	} {
		if re.MatchString(name) != want {
			t.Errorf("%q: match %v", name, !want)
		}
	}
}

func TestRepository(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.k8s.io/e2e-test-images/agnhost:2.66.1": "e2e-test-images/agnhost",
		"registry.k8s.io/pause:3.10.2":                   "pause",
		"localhost:5000/x/y:1":                           "x/y",
		"busybox":                                        "busybox",
	} {
		if got := repository(ref); got != want {
			t.Errorf("repository(%q) = %q, want %q", ref, got, want)
		}
	}
	if archiveName("registry.k8s.io/pause:3.10.2") != "registry.k8s.io_pause_3.10.2.tar" {
		t.Error(archiveName("registry.k8s.io/pause:3.10.2"))
	}
}

// A partial run keeps the whole suite's totals: what it did not select comes from the base
// run, marked with the base's commit; what it re-ran replaces the base's result.
func TestOverlay(t *testing.T) {
	base := &Summary{Date: "2026-11-30", Commit: "003ca8bfdf51aaaa", Focus: `\[Conformance\]`, Results: []Result{
		{Name: "[sig-node] a", SIG: "sig-node", State: Failed, Error: "boom"},
		{Name: "[sig-apps] b", SIG: "sig-apps", State: Passed},
		{Name: "[sig-apps] c", SIG: "sig-apps", State: Failed, Error: "x", CarriedFrom: "older"},
	}}
	s := &Summary{Commit: "e209f14", Results: []Result{{Name: "[sig-node] a", SIG: "sig-node", State: Passed}}}
	Overlay(s, base)
	Summarize(s)
	if s.Totals.Selected != 3 || s.Totals.Passed != 2 || s.Totals.Failed != 1 {
		t.Fatalf("totals %+v", s.Totals)
	}
	got := map[string]Result{}
	for _, r := range s.Results {
		got[r.Name] = r
	}
	if r := got["[sig-node] a"]; r.State != Passed || r.CarriedFrom != "" {
		t.Errorf("the re-run spec: %+v", r)
	}
	if r := got["[sig-apps] b"]; r.CarriedFrom != "003ca8bfdf51aaaa" {
		t.Errorf("a carried spec: %+v", r)
	}
	if r := got["[sig-apps] c"]; r.CarriedFrom != "older" {
		t.Errorf("a spec carried twice keeps where it was measured: %+v", r)
	}
	if s.Base == nil || s.Base.Carried != 2 || s.Base.Commit != base.Commit {
		t.Errorf("base %+v", s.Base)
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**2 of 3 conformance specs pass", "| carried over | 2 specs this run did not select keep their earlier result (1 at 003ca8b, 1 at older;", "- [sig-apps] b *(from 003ca8b)*", "- [sig-node] a\n"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("RESULTS.md lacks %q:\n%s", want, md.String())
		}
	}
}

func TestCountRuns(t *testing.T) {
	log := strings.Join([]string{
		"Running Suite: Kubernetes e2e suite", "Ran 3 of 7022 Specs in 41.2 seconds",
		"SUCCESS! -- 3 Passed | 0 Failed | 0 Pending | 7019 Skipped", "",
		"Ginkgo is rerunning the suite (attempt 2 of 3)",
		"Ran 3 of 7022 Specs in 40.1 seconds",
		"FAIL! -- 2 Passed | 1 Failed | 0 Pending | 7019 Skipped",
		"  a line mentioning SUCCESS! -- elsewhere is not a run",
	}, "\n")
	if got := CountRuns(log, 3); got != (Repeat{Asked: 3, Passed: 1, Failed: 1}) {
		t.Fatalf("CountRuns = %+v, want 3 asked, 1 passed, 1 failed", got)
	}
}
