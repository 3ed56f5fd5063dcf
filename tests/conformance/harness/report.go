package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// ginkgoReport is the part of ginkgo v2's JSON report (types.Report) the harness reads;
// its own struct, so skiff's module does not depend on ginkgo.
type ginkgoReport struct {
	SuiteDescription string
	SuiteSucceeded   bool
	StartTime        time.Time
	EndTime          time.Time
	SpecReports      []ginkgoSpec
}

type ginkgoSpec struct {
	ContainerHierarchyTexts []string
	LeafNodeType            string
	LeafNodeText            string
	State                   string
	RunTime                 time.Duration
	ParallelProcess         int
	Failure                 *struct {
		Message        string
		ForwardedPanic string `json:",omitempty"`
	} `json:",omitempty"`
}

func (s ginkgoSpec) name() string {
	return strings.TrimSpace(strings.Join(append(slices.Clone(s.ContainerHierarchyTexts), s.LeafNodeText), " "))
}

// readReports parses a ginkgo JSON report file (a list of suite reports).
func readReports(file string) ([]ginkgoReport, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var reports []ginkgoReport
	if err := json.Unmarshal(b, &reports); err != nil {
		return nil, fmt.Errorf("%s: not a ginkgo JSON report: %w", file, err)
	}
	return reports, nil
}

// Outcomes of one spec in the results.
const (
	Passed      = "passed"
	Failed      = "failed"
	Skipped     = "skipped"
	NotReported = "not reported"
)

// Result is one selected spec's outcome.
type Result struct {
	Name    string        `json:"name"`
	SIG     string        `json:"sig"`
	State   string        `json:"state"`
	RunTime time.Duration `json:"runTimeNanos,omitempty"`
	// Error is the failure's first line, Cause that line with names and numbers
	// generalized (what groups failures), Issue the skiff issue that owns the cause.
	Error string `json:"error,omitempty"`
	Cause string `json:"cause,omitempty"`
	Issue string `json:"issue,omitempty"`
	// CarriedFrom is the commit of the earlier run this result comes from, when this run did
	// not select the spec (see Overlay); empty for a result of this run.
	CarriedFrom string `json:"carriedFrom,omitempty"`
}

// Merge turns the dry run's list of selected specs and the reports of every run (a later
// run, which retried specs an earlier one lost, wins) into one result per selected spec.
// A spec no run reported — its ginkgo process died under it — is NotReported, so every
// selected spec appears exactly once.
func Merge(selected []string, runs ...[]ginkgoReport) []Result {
	byName := map[string]Result{}
	for _, run := range runs {
		for _, rep := range run {
			for _, s := range rep.SpecReports {
				if s.LeafNodeType != "It" {
					continue
				}
				r := Result{Name: s.name(), SIG: sigOf(s.name()), RunTime: s.RunTime}
				switch s.State {
				case "passed":
					r.State = Passed
				case "skipped", "pending":
					r.State = Skipped
				default: // failed, panicked, timedout, interrupted, aborted
					r.State = Failed
					msg := ""
					if s.Failure != nil {
						msg = s.Failure.Message
						if msg == "" {
							msg = s.Failure.ForwardedPanic
						}
					}
					if s.State != "failed" {
						msg = s.State + ": " + msg
					}
					r.Error = firstLine(msg)
				}
				if prev, ok := byName[r.Name]; ok && prev.State != Skipped && r.State == Skipped {
					continue // a later run that filtered the spec out says nothing of it
				}
				byName[r.Name] = r
			}
		}
	}
	out := make([]Result, 0, len(selected))
	for _, name := range selected {
		r, ok := byName[name]
		if !ok {
			r = Result{Name: name, SIG: sigOf(name), State: NotReported,
				Error: "no result: the ginkgo process running it exited (it was retried and lost again)"}
		}
		if r.State == Failed || r.State == NotReported {
			r.Cause = Cause(r.Error)
			r.Issue = Owner(r.Name, r.Error)
		}
		out = append(out, r)
	}
	return out
}

// Selected lists the specs a dry run would run (ginkgo marks the others skipped).
func Selected(dry []ginkgoReport) []string {
	var names []string
	for _, rep := range dry {
		for _, s := range rep.SpecReports {
			if s.LeafNodeType == "It" && s.State == "passed" {
				names = append(names, s.name())
			}
		}
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// Missing lists the selected specs without a real outcome in the results so far.
func Missing(selected []string, runs ...[]ginkgoReport) []string {
	var out []string
	for _, r := range Merge(selected, runs...) {
		if r.State == NotReported {
			out = append(out, r.Name)
		}
	}
	return out
}

var sigRE = regexp.MustCompile(`\[sig-[a-z-]+\]`)

func sigOf(name string) string {
	if m := sigRE.FindString(name); m != "" {
		return strings.Trim(m, "[]")
	}
	return "other"
}

func firstLine(msg string) string {
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 300 {
				l = l[:300] + "…"
			}
			return l
		}
	}
	return "(no failure message)"
}

// Generalizations that make one cause of many failures one line: test namespaces, random
// name suffixes, addresses, durations and numbers.
var causeRules = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\b[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+(:[0-9]+)?\b`), "ADDR"},
	{regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "UID"},
	{regexp.MustCompile(`"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"`), `"NAME"`},
	{regexp.MustCompile(`\b[a-z][-a-z0-9]*-[0-9]+\b`), "NAME"},
	{regexp.MustCompile(`\b[a-z][-a-z0-9]*-[a-z0-9]{5}\b`), "NAME"},
	{regexp.MustCompile(`\b([0-9]+(\.[0-9]+)?(ns|µs|ms|s|m|h))+\b`), "DURATION"},
	{regexp.MustCompile(`\b[0-9]+\b`), "N"},
}

// Cause generalizes a failure's first line so that failures for one reason group together.
func Cause(line string) string {
	for _, r := range causeRules {
		line = r.re.ReplaceAllString(line, r.with)
	}
	return line
}

// owners say which open issue is to make a failing spec pass, matched against the spec's
// name and its first error line; the first match wins. What matches none is this harness's
// business (issue 11) and listed as such.
var owners = []struct {
	issue string
	re    *regexp.Regexp
}{
	{"unassigned: certificates.k8s.io ClusterTrustBundles and PodCertificateRequests (served since 2026-12-04; no issue owns them)", regexp.MustCompile(`(?i)ClusterTrustBundle|PodCertificate`)},
	// The OIDC discovery spec's pod fetches https://kubernetes.default.svc.cluster.local: DNS.
	{"#16 DNS and LoadBalancer", regexp.MustCompile(`ServiceAccountIssuerDiscovery`)},
	// The Ingress API specs name the group's other resources (networkpolicies) in their error.
	{"#17 workloads and core APIs", regexp.MustCompile(`\[sig-network\] Ingress(Class)? API`)},
	{"#14 authorization (RBAC)", regexp.MustCompile(`(?i)rbac\.authorization|roles\.rbac|rolebindings|clusterroles|subjectaccessreview|\[sig-auth\]`)},
	{"#15 NetworkPolicy", regexp.MustCompile(`(?i)networkpolic|\bNetpol\b`)},
	// A Service reached by its name ("endpoint externalname-service:80") needs cluster DNS.
	{"#16 DNS and LoadBalancer", regexp.MustCompile(`(?i)\[sig-network\] DNS|type=LoadBalancer|LoadBalancer|dns-test|\bDNS\b|on endpoint [a-z][-a-z0-9]*:[0-9]+ over`)},
	{"#18 extensibility and admission", regexp.MustCompile(`(?i)customresourcedefinition|CustomResource|apiservices|webhook|admissionpolic|Aggregator|metrics\.k8s\.io|flowcontrol|ResourceQuota|LimitRange|\[sig-instrumentation\]|Discovery|StorageVersionMigration`)},
	{"#17 workloads and core APIs", regexp.MustCompile(`(?i)\bjobs?\b|cronjob|statefulset|poddisruptionbudget|replication ?controller|\brc\b|controllerrevision|Proxy version|podtemplate|persistentvolume|storageclass|csidriver|csinode|csistoragecapacit|volumeattachment|runtimeclass|priorityclass|preempt|ingress|horizontalpodautoscaler|eviction|\bdrain\b|/proxy|proxy subresource|\[DRA\]|resource\.k8s\.io|VolumeAttributesClass|\[sig-scheduling\]`)},
	{"#13 agent behaviour (node, volumes)", regexp.MustCompile(`\[sig-node\]|\[sig-storage\]`)},
}

// Owner names the issue that owns a failing spec.
func Owner(name, errLine string) string {
	for _, o := range owners {
		if o.re.MatchString(name) || o.re.MatchString(errLine) {
			return o.issue
		}
	}
	return "#11 harness (unassigned)"
}

// Summary is what RESULTS.md and results.json say of a run.
type Summary struct {
	Date       string   `json:"date"`
	Commit     string   `json:"commit"`
	E2E        string   `json:"e2eVersion"`
	Lab        string   `json:"lab"`
	Procs      int      `json:"procs"`
	Focus      string   `json:"focus"`
	Skip       string   `json:"skip,omitempty"`
	Duration   string   `json:"duration"`
	Images     []string `json:"imagesNotBuilt,omitempty"`
	Results    []Result `json:"results"`
	Totals     Totals   `json:"totals"`
	SIGTotals  []SIG    `json:"sigs"`
	TotalSpecs int      `json:"specsInBinary"`
	// Base, when set, is the earlier full run whose results stand for the specs this run did
	// not select.
	Base *BaseRun `json:"base,omitempty"`
	// Repeat, when set, counts the runs of a repeated run (--repeat); the results are its
	// last run's.
	Repeat *Repeat `json:"repeat,omitempty"`
}

// Repeat is how the runs of a repeated run went.
type Repeat struct {
	Asked  int `json:"asked"`
	Passed int `json:"passed"`
	Failed int `json:"failed"`
}

// CountRuns counts the suite runs a ginkgo log reports ("SUCCESS!" or "FAIL!" after each
// "Ran N of M Specs"), asked of them in all.
func CountRuns(log string, asked int) Repeat {
	r := Repeat{Asked: asked}
	for _, line := range strings.Split(log, "\n") {
		switch {
		case strings.HasPrefix(line, "SUCCESS! -- "):
			r.Passed++
		case strings.HasPrefix(line, "FAIL! -- "):
			r.Failed++
		}
	}
	return r
}

// BaseRun names the run results were carried over from.
type BaseRun struct {
	Date    string `json:"date"`
	Commit  string `json:"commit"`
	Focus   string `json:"focus"`
	Carried int    `json:"carried"`
}

// Overlay completes a partial run (say, only [sig-node] and [sig-storage]) with an earlier
// run's results for every spec the partial run did not select, each marked with the commit
// it was measured at, so the totals stay those of the whole suite and say what is fresh.
func Overlay(s *Summary, base *Summary) {
	fresh := map[string]bool{}
	for _, r := range s.Results {
		fresh[r.Name] = true
	}
	carried := 0
	for _, r := range base.Results {
		if fresh[r.Name] {
			continue
		}
		if r.CarriedFrom == "" {
			r.CarriedFrom = base.Commit
		}
		if r.State == Failed || r.State == NotReported {
			r.Cause, r.Issue = Cause(r.Error), Owner(r.Name, r.Error) // grouped as this harness groups
		}
		s.Results = append(s.Results, r)
		carried++
	}
	sort.SliceStable(s.Results, func(i, j int) bool { return s.Results[i].Name < s.Results[j].Name })
	s.Base = &BaseRun{Date: base.Date, Commit: base.Commit, Focus: base.Focus, Carried: carried}
}

// Totals counts outcomes.
type Totals struct {
	Selected    int `json:"selected"`
	Passed      int `json:"passed"`
	Failed      int `json:"failed"`
	Skipped     int `json:"skipped"`
	NotReported int `json:"notReported"`
}

// SIG is one SIG's totals.
type SIG struct {
	Name string `json:"name"`
	Totals
}

func (t *Totals) add(state string) {
	t.Selected++
	switch state {
	case Passed:
		t.Passed++
	case Failed:
		t.Failed++
	case Skipped:
		t.Skipped++
	case NotReported:
		t.NotReported++
	}
}

// Summarize counts the results, overall and per SIG.
func Summarize(s *Summary) {
	s.Totals = Totals{}
	sigs := map[string]*Totals{}
	for _, r := range s.Results {
		s.Totals.add(r.State)
		if sigs[r.SIG] == nil {
			sigs[r.SIG] = &Totals{}
		}
		sigs[r.SIG].add(r.State)
	}
	s.SIGTotals = nil
	for name, t := range sigs {
		s.SIGTotals = append(s.SIGTotals, SIG{Name: name, Totals: *t})
	}
	sort.Slice(s.SIGTotals, func(i, j int) bool { return s.SIGTotals[i].Name < s.SIGTotals[j].Name })
}

// Headline is the one line the README quotes.
func (s *Summary) Headline() string {
	return fmt.Sprintf("%d of %d conformance specs pass (%d fail, %d skipped, %d not reported)",
		s.Totals.Passed, s.Totals.Selected, s.Totals.Failed, s.Totals.Skipped, s.Totals.NotReported)
}

// WriteMarkdown renders RESULTS.md: the run, totals per SIG, then every failing spec grouped
// by its owning issue and cause, largest group first.
func WriteMarkdown(w io.Writer, s *Summary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Conformance results\n\n")
	fmt.Fprintf(&b, "Written by `make conformance` (tests/conformance/harness); do not edit by hand.\n\n")
	fmt.Fprintf(&b, "**%s.**\n\n", s.Headline())
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| date | %s |\n| skiff commit | %s |\n| e2e suite | k8s.io/kubernetes %s (`e2e.test`, %d specs in all) |\n", s.Date, s.Commit, s.E2E, s.TotalSpecs)
	fmt.Fprintf(&b, "| lab | %s |\n| ginkgo processes | %d |\n| focus | `%s` |\n", s.Lab, s.Procs, s.Focus)
	if s.Skip != "" {
		fmt.Fprintf(&b, "| skip | `%s` |\n", s.Skip)
	}
	fmt.Fprintf(&b, "| duration | %s |\n", s.Duration)
	if s.Repeat != nil {
		fmt.Fprintf(&b, "| runs in a row | %d asked: %d passed, %d failed (the results below are the last run's) |\n", s.Repeat.Asked, s.Repeat.Passed, s.Repeat.Failed)
	}
	if s.Base != nil {
		// Where each carried result was measured (a base may itself carry older ones).
		at := map[string]int{}
		for _, r := range s.Results {
			if r.CarriedFrom != "" {
				at[short(r.CarriedFrom)]++
			}
		}
		var where []string
		for c, n := range at {
			where = append(where, fmt.Sprintf("%d at %s", n, c))
		}
		sort.Strings(where)
		fmt.Fprintf(&b, "| carried over | %d specs this run did not select keep their earlier result (%s; the results of %s were the base), each marked *(from COMMIT)* below |\n",
			s.Base.Carried, strings.Join(where, ", "), short(s.Base.Commit))
	}
	if len(s.Images) > 0 {
		fmt.Fprintf(&b, "| images not built here | %s |\n", strings.Join(s.Images, ", "))
	}
	fmt.Fprintf(&b, "\n## Per SIG\n\n| SIG | selected | passed | failed | skipped | not reported |\n|---|---:|---:|---:|---:|---:|\n")
	for _, g := range s.SIGTotals {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d |\n", g.Name, g.Selected, g.Passed, g.Failed, g.Skipped, g.NotReported)
	}
	t := s.Totals
	fmt.Fprintf(&b, "| **all** | **%d** | **%d** | **%d** | **%d** | **%d** |\n", t.Selected, t.Passed, t.Failed, t.Skipped, t.NotReported)

	type group struct {
		issue, cause string
		specs        []Result
	}
	groups := map[[2]string]*group{}
	perIssue := map[string]int{}
	for _, r := range s.Results {
		if r.State != Failed && r.State != NotReported {
			continue
		}
		k := [2]string{r.Issue, r.Cause}
		if groups[k] == nil {
			groups[k] = &group{issue: r.Issue, cause: r.Cause}
		}
		groups[k].specs = append(groups[k].specs, r)
		perIssue[r.Issue]++
	}
	var list []*group
	for _, g := range groups {
		list = append(list, g)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].issue != list[j].issue {
			return list[i].issue < list[j].issue
		}
		if len(list[i].specs) != len(list[j].specs) {
			return len(list[i].specs) > len(list[j].specs)
		}
		return list[i].cause < list[j].cause
	})
	fmt.Fprintf(&b, "\n## Failures by owning issue and cause\n\n")
	var issues []string
	for i := range perIssue {
		issues = append(issues, i)
	}
	sort.Strings(issues)
	fmt.Fprintf(&b, "| issue | failing specs |\n|---|---:|\n")
	for _, i := range issues {
		fmt.Fprintf(&b, "| %s | %d |\n", i, perIssue[i])
	}
	last := ""
	for _, g := range list {
		if g.issue != last {
			fmt.Fprintf(&b, "\n### %s\n", g.issue)
			last = g.issue
		}
		fmt.Fprintf(&b, "\n**%d × `%s`**\n\n", len(g.specs), strings.ReplaceAll(g.cause, "`", "'"))
		for _, r := range g.specs {
			fmt.Fprintf(&b, "- %s — `%s`%s\n", r.Name, strings.ReplaceAll(r.Error, "`", "'"), carriedNote(r))
		}
	}
	fmt.Fprintf(&b, "\n## Passing\n\n")
	for _, r := range s.Results {
		if r.State == Passed {
			fmt.Fprintf(&b, "- %s%s\n", r.Name, carriedNote(r))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func carriedNote(r Result) string {
	if r.CarriedFrom == "" {
		return ""
	}
	return " *(from " + short(r.CarriedFrom) + ")*"
}

func short(commit string) string {
	if len(commit) > 7 {
		return commit[:7]
	}
	return commit
}

// WriteJUnit renders the merged results as one JUnit test suite, for tools that read JUnit
// (a spec without a result is an error, as JUnit names a test that could not run).
func WriteJUnit(w io.Writer, s *Summary) error {
	type failure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
	}
	type testcase struct {
		Name      string    `xml:"name,attr"`
		Classname string    `xml:"classname,attr"`
		Time      float64   `xml:"time,attr"`
		Failure   *failure  `xml:"failure,omitempty"`
		Error     *failure  `xml:"error,omitempty"`
		Skipped   *struct{} `xml:"skipped,omitempty"`
	}
	type suite struct {
		XMLName  xml.Name   `xml:"testsuite"`
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Errors   int        `xml:"errors,attr"`
		Skipped  int        `xml:"skipped,attr"`
		Cases    []testcase `xml:"testcase"`
	}
	out := suite{Name: "Kubernetes e2e suite " + s.E2E + " against skiff " + s.Commit, Tests: s.Totals.Selected,
		Failures: s.Totals.Failed, Errors: s.Totals.NotReported, Skipped: s.Totals.Skipped}
	for _, r := range s.Results {
		c := testcase{Name: r.Name, Classname: r.SIG, Time: r.RunTime.Seconds()}
		switch r.State {
		case Failed:
			c.Failure = &failure{Message: r.Error, Type: r.Issue}
		case NotReported:
			c.Error = &failure{Message: r.Error, Type: r.Issue}
		case Skipped:
			c.Skipped = &struct{}{}
		}
		out.Cases = append(out.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", " ")
	return enc.Encode(out)
}
