// Command harness runs upstream's conformance suite — the [Conformance] specs of
// k8s.io/kubernetes's e2e test binary, what Sonobuoy and hydrophone run to certify a
// distribution — against a skiff lab, and writes what it found: `make conformance` (every
// conformance spec, RESULTS.md) and `make conformance-smoke` (a fixed list that passes today,
// for CI).
//
// One run: list the images the binary asks for and build the ones it can without a registry;
// list the selected specs with a dry run; bring up a lab and import the images into every
// node's containerd; run ginkgo in parallel (serial specs after); run again whatever a dead
// ginkgo process lost; merge the reports so every selected spec has one outcome; take the lab
// down — also when interrupted.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

type options struct {
	binDir, kubeSrc, skiff, pause, busybox, kubectl, etcd string
	lab, ipFamily                                         string
	nodes, procs, repeat                                  int
	focus, skip, smoke                                    string
	work, out                                             string
	e2eVersion                                            string
	timeout                                               time.Duration
	reportOnly                                            bool
	base                                                  string
	duration, commit                                      string
	// images, if set, lists the only images to build: the lab is brought up with them
	// imported and left up for another suite (make npapi-conformance), no spec is run.
	images string
}

func main() {
	var o options
	flag.StringVar(&o.binDir, "bin-dir", "tests/conformance/e2e/bin", "directory with e2e.test, ginkgo and agnhost (make conformance-bin)")
	flag.StringVar(&o.kubeSrc, "kube-src", "", "the k8s.io/kubernetes module directory (agnhost's certificates, kitten's and nautilus's pages)")
	flag.StringVar(&o.skiff, "skiff", "bin/skiff", "the skiff binary the lab runs")
	flag.StringVar(&o.pause, "pause", "bin/pause", "skiff's static pause binary")
	flag.StringVar(&o.busybox, "busybox", "", "a static BusyBox 1.37 as upstream releases it (default BIN-DIR/busybox, which hack/build-busybox.sh builds)")
	flag.StringVar(&o.etcd, "etcd", "/usr/bin/etcd", "Debian's etcd (etcd-server), for the sample-apiserver's spec")
	flag.StringVar(&o.kubectl, "kubectl", "/usr/lib/google-cloud-sdk/bin/kubectl.1.33", "the kubectl the specs run")
	flag.StringVar(&o.lab, "lab", "conf", "name of the lab to bring up (and take down)")
	flag.IntVar(&o.nodes, "nodes", 2, "worker nodes besides the master")
	flag.StringVar(&o.ipFamily, "ip-family", "ipv4", "the lab's IP family (skiff lab up --ip-family): ipv4, dual or ipv6")
	flag.IntVar(&o.procs, "procs", 6, "parallel ginkgo processes (serial specs run after, on one)")
	flag.IntVar(&o.repeat, "repeat", 1, "run the selected specs this many times in a row (ginkgo --repeat), stopping at the first run that fails")
	flag.StringVar(&o.focus, "focus", `\[Conformance\]`, "ginkgo focus regexp")
	flag.StringVar(&o.skip, "skip", "", "ginkgo skip regexp")
	flag.StringVar(&o.smoke, "smoke", "", "file listing exact spec names, one a line: run only those, and fail unless every one passes")
	flag.StringVar(&o.work, "work", "tests/conformance/e2e/run", "working directory: images, reports, logs (not committed)")
	flag.StringVar(&o.out, "out", "", "directory for RESULTS.md, results.json and junit.xml (a full run: tests/conformance)")
	flag.StringVar(&o.e2eVersion, "e2e-version", "v1.37.2", "the k8s.io/kubernetes version e2e.test was built from")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Hour, "ginkgo's suite timeout")
	flag.BoolVar(&o.reportOnly, "report-only", false, "run nothing: write the results again from the reports a run left in --work (after changing how failures are grouped)")
	flag.StringVar(&o.duration, "duration", "", "with --report-only: the run's duration to record")
	flag.StringVar(&o.base, "base", "", "results.json of an earlier run: specs this run does not select keep their result from it (marked as carried over)")
	flag.StringVar(&o.commit, "commit", "", "with --report-only: the skiff commit the run tested (default: this checkout's)")
	flag.StringVar(&o.images, "images", "", "comma-separated image references: build only these, bring the lab up with them imported and leave it up (for another suite), run no spec")
	flag.Parse()
	if o.reportOnly {
		if err := report(o); err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Printf("conformance: "+format+"\n", args...)
}

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	tested := commit() // what the lab runs is built now; the checkout may move on meanwhile
	e2e := filepath.Join(o.binDir, "e2e.test")
	ginkgo := filepath.Join(o.binDir, "ginkgo")
	if o.busybox == "" {
		o.busybox = filepath.Join(o.binDir, "busybox")
	}
	for _, f := range []string{e2e, ginkgo, filepath.Join(o.binDir, "agnhost"), o.skiff, o.pause, o.busybox, o.kubectl} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%s is missing (make conformance builds it): %w", f, err)
		}
	}
	if err := os.MkdirAll(o.work, 0o755); err != nil {
		return err
	}
	if o.smoke != "" {
		focus, err := focusFromList(o.smoke)
		if err != nil {
			return err
		}
		o.focus = focus
	}

	src := Sources{Agnhost: filepath.Join(o.binDir, "agnhost"), KubeSrc: o.kubeSrc, Busybox: o.busybox, Pause: o.pause,
		SampleAPIServer: filepath.Join(o.binDir, "sample-apiserver"), Etcd: o.etcd, Nonewprivs: filepath.Join(o.binDir, "nnp")}
	if o.images != "" {
		return imagesOnly(ctx, o, src)
	}
	// Images under the references the binary asks for.
	listed, err := exec.CommandContext(ctx, e2e, "--list-images").Output()
	if err != nil {
		return fmt.Errorf("e2e.test --list-images: %w", err)
	}
	archives, notBuilt, err := BuildImages(src, strings.Fields(string(listed)), filepath.Join(o.work, "images"))
	if err != nil {
		return err
	}
	logf("built %d images; not built here: %s", len(archives), strings.Join(notBuilt, " "))
	_ = os.WriteFile(filepath.Join(o.work, "images-not-built.txt"), []byte(strings.Join(notBuilt, "\n")+"\n"), 0o644)

	// The selected specs, from a dry run: what every outcome is counted against.
	dryFile := filepath.Join(o.work, "dry-run.json")
	_ = os.Remove(dryFile)
	dry := exec.CommandContext(ctx, e2e, "--ginkgo.dry-run", "--ginkgo.focus="+o.focus, "--ginkgo.skip="+o.skip,
		"--ginkgo.json-report="+dryFile, "--ginkgo.silence-skips", "--ginkgo.no-color", "--provider=skeleton")
	if out, err := dry.CombinedOutput(); err != nil {
		if _, serr := os.Stat(dryFile); serr != nil {
			return fmt.Errorf("e2e.test --ginkgo.dry-run: %v: %s", err, tail(out, 2000))
		}
	}
	dryReports, err := readReports(dryFile)
	if err != nil {
		return err
	}
	selected := Selected(dryReports)
	total := specCount(dryReports)
	if len(selected) == 0 {
		return fmt.Errorf("focus %q skip %q select no spec", o.focus, o.skip)
	}
	logf("%d of %d specs selected", len(selected), total)

	// The lab, taken down whatever happens next.
	labDir, down, err := labWithImages(ctx, o, archives)
	defer down()
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(labDir, "admin.kubeconfig")
	e2eArgs := []string{"--provider=skeleton", "--kubeconfig=" + kubeconfig, "--kubectl-path=" + o.kubectl,
		"--non-blocking-taints=node-role.kubernetes.io/control-plane", "--dump-logs-on-failure=false", "--disable-log-dump",
		// The schedulable nodes (the workers; the master is tainted). The suite counts them
		// itself in its first parallel process only, so specs that need two nodes
		// ([Feature:IPv6DualStack]'s among them) skip in the others ("not -1").
		fmt.Sprintf("--num-nodes=%d", o.nodes)}
	runs := [][]ginkgoReport{}
	runOnce := func(n int, focus string, procs int) error {
		// ginkgo writes its reports under --output-dir, by their base names.
		report := filepath.Join(o.work, fmt.Sprintf("report-%d.json", n))
		_ = os.Remove(report)
		args := []string{"--no-color", "--timeout=" + o.timeout.String(), "--focus=" + focus, "--skip=" + o.skip,
			"--json-report=" + filepath.Base(report), "--junit-report=" + fmt.Sprintf("junit-%d.xml", n),
			"--output-dir=" + o.work, "--silence-skips", "--keep-going"}
		if procs > 1 {
			args = append(args, "-p", fmt.Sprintf("--procs=%d", procs))
		}
		if n == 1 && o.repeat > 1 {
			args = append(args, fmt.Sprintf("--repeat=%d", o.repeat-1))
		}
		args = append(append(args, e2e, "--"), e2eArgs...)
		logFile, err := os.Create(filepath.Join(o.work, fmt.Sprintf("ginkgo-%d.log", n)))
		if err != nil {
			return err
		}
		defer logFile.Close()
		cmd := exec.Command(ginkgo, args...)
		cmd.Stdout = io.MultiWriter(logFile, os.Stdout)
		cmd.Stderr = cmd.Stdout
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-ctx.Done():
			// ginkgo reports what ran when interrupted; give it a moment, then end the group.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				err = <-done
			}
		}
		logf("ginkgo run %d ended: %v", n, err)
		reps, rerr := readReports(report)
		if rerr != nil {
			logf("ginkgo run %d left no report: %v", n, rerr)
			return nil
		}
		runs = append(runs, reps)
		return nil
	}
	if err := runOnce(1, o.focus, o.procs); err != nil {
		return err
	}
	var repeated *Repeat
	if o.repeat > 1 {
		// ginkgo writes the report of its last run only: the runs are counted from its log.
		log, err := os.ReadFile(filepath.Join(o.work, "ginkgo-1.log"))
		if err != nil {
			return err
		}
		r := CountRuns(string(log), o.repeat)
		repeated = &r
		logf("repeat: %d of %d runs passed, %d failed", r.Passed, r.Asked, r.Failed)
	}
	// A ginkgo process that dies (a spec that calls Failf outside its goroutine, say) takes
	// its current spec with it, and process 1's death the serial specs; run those once more.
	if missing := Missing(selected, runs...); len(missing) > 0 && ctx.Err() == nil {
		logf("%d selected specs have no result; running them again", len(missing))
		if err := runOnce(2, exactFocus(missing), min(o.procs, 2)); err != nil {
			return err
		}
	}

	duration := time.Since(start).Round(time.Second).String()
	if ctx.Err() != nil {
		duration += " (interrupted)"
	}
	s := newSummary(o, time.Now().UTC().Format("2006-01-02"), tested, duration, notBuilt, total, Merge(selected, runs...))
	s.Repeat = repeated
	if o.smoke != "" {
		s.Focus = "the specs listed in " + o.smoke
	}
	if _, err := publish(o, s); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted")
	}
	if repeated != nil && repeated.Passed != repeated.Asked {
		return fmt.Errorf("repeat: %d of %d runs passed", repeated.Passed, repeated.Asked)
	}
	if o.smoke != "" && s.Totals.Passed != s.Totals.Selected {
		for _, r := range s.Results {
			if r.State != Passed {
				logf("smoke: %s: %s %s", r.Name, r.State, r.Error)
			}
		}
		// CI keeps only this output: what the lab's processes logged as errors says why.
		for _, role := range append([]string{"master"}, nodeRoles(o.nodes)...) {
			path := filepath.Join(labDir, role+".log")
			if lines := errorLines(path, 40); len(lines) > 0 {
				logf("the last %d error lines of %s:\n%s", len(lines), path, strings.Join(lines, "\n"))
			}
		}
		return fmt.Errorf("smoke: %d of %d specs did not pass", s.Totals.Selected-s.Totals.Passed, s.Totals.Selected)
	}
	return nil
}

// report rewrites the results from the reports of an earlier run in o.work.
func report(o options) error {
	dry, err := readReports(filepath.Join(o.work, "dry-run.json"))
	if err != nil {
		return err
	}
	var runs [][]ginkgoReport
	for n := 1; ; n++ {
		reps, err := readReports(filepath.Join(o.work, fmt.Sprintf("report-%d.json", n)))
		if err != nil {
			break
		}
		runs = append(runs, reps)
	}
	if len(runs) == 0 {
		return fmt.Errorf("no report-N.json in %s", o.work)
	}
	var notBuilt []string
	if b, err := os.ReadFile(filepath.Join(o.work, "images-not-built.txt")); err == nil {
		notBuilt = strings.Fields(string(b))
	}
	date := time.Now().UTC().Format("2006-01-02")
	if len(runs[0]) > 0 && !runs[0][0].StartTime.IsZero() {
		date = runs[0][0].StartTime.UTC().Format("2006-01-02")
	}
	tested := o.commit
	if tested == "" {
		tested = commit()
	}
	_, err = publish(o, newSummary(o, date, tested, o.duration, notBuilt, specCount(dry), Merge(Selected(dry), runs...)))
	return err
}

// newSummary is the run's summary before counting.
func newSummary(o options, date, tested, duration string, notBuilt []string, total int, results []Result) *Summary {
	return &Summary{Date: date, Commit: tested, E2E: o.e2eVersion,
		Lab:   fmt.Sprintf("`skiff lab up --nodes %d --tor frr --ip-family %s`: a master (control-plane, NoSchedule) and %d workers", o.nodes, o.ipFamily, o.nodes),
		Procs: o.procs, Focus: o.focus, Skip: o.skip, Duration: duration, Images: notBuilt, TotalSpecs: total, Results: results}
}

// publish counts the summary and writes the results into --out (or the work directory).
func publish(o options, s *Summary) (string, error) {
	if o.base != "" {
		b, err := os.ReadFile(o.base)
		if err != nil {
			return "", fmt.Errorf("--base: %w", err)
		}
		var base Summary
		if err := json.Unmarshal(b, &base); err != nil {
			return "", fmt.Errorf("--base %s: %w", o.base, err)
		}
		Overlay(s, &base)
	}
	Summarize(s)
	dest := o.out
	if dest == "" {
		dest = o.work
	}
	if err := writeResults(dest, s, o.work); err != nil {
		return "", err
	}
	logf("%s — %s", s.Headline(), filepath.Join(dest, "RESULTS.md"))
	return dest, nil
}

// specCount counts the specs in the binary (every It of the dry run).
func specCount(dry []ginkgoReport) int {
	n := 0
	for _, r := range dry {
		for _, s := range r.SpecReports {
			if s.LeafNodeType == "It" {
				n++
			}
		}
	}
	return n
}

func writeResults(dir string, s *Summary, work string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "RESULTS.md"))
	if err != nil {
		return err
	}
	if err := WriteMarkdown(f, s); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(s, "", " ")
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	var junit strings.Builder
	if err := WriteJUnit(&junit, s); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "junit.xml"), []byte(junit.String()), 0o644)
}

// focusFromList makes a focus matching exactly the spec names a file lists.
func focusFromList(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	var names []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			names = append(names, l)
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("%s lists no spec", file)
	}
	return exactFocus(names), nil
}

// suiteDescription is what ginkgo puts before every spec's name when it matches a focus.
const suiteDescription = "Kubernetes e2e suite"

// exactFocus is a ginkgo focus that selects exactly these full spec names.
func exactFocus(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return "^(?:" + regexp.QuoteMeta(suiteDescription) + " )?(?:" + strings.Join(quoted, "|") + ")$"
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); len(strings.TrimSpace(string(st))) > 0 {
		c += " (with uncommitted changes)"
	}
	return c
}

// nodeRoles are the lab's worker hosts, named as their logs are.
func nodeRoles(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("node%d", i))
	}
	return out
}

// errorLines is the last n error lines of a log file: slog's (level=ERROR) and klog's
// (E1206 12:00:00.000000 ...).
func errorLines(path string, n int) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, " level=ERROR ") || len(line) > 5 && line[0] == 'E' && line[1] >= '0' && line[1] <= '9' {
			out = append(out, line)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// labWithImages brings the lab up and imports the image archives into every node's
// containerd; down takes it down again.
func labWithImages(ctx context.Context, o options, archives []string) (labDir string, down func(), err error) {
	skiff := func(args ...string) error {
		cmd := exec.Command(o.skiff, append([]string{"lab"}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	_ = skiff("down", "--name", o.lab)
	down = func() {
		logf("taking lab %s down", o.lab)
		if err := skiff("down", "--name", o.lab); err != nil {
			logf("lab down: %v", err)
		}
	}
	up := exec.CommandContext(ctx, o.skiff, "lab", "up", "--name", o.lab, "--nodes", fmt.Sprint(o.nodes), "--tor", "frr", "--timeout", "5m", "--ip-family", o.ipFamily)
	up.Stdout, up.Stderr = os.Stdout, os.Stderr
	if err := up.Run(); err != nil {
		return "", down, fmt.Errorf("lab up: %w", err)
	}
	labDir = filepath.Join("/var/lib/skiff/lab", o.lab)
	agents := []string{filepath.Join(labDir, "master", "agent")}
	for i := 1; i <= o.nodes; i++ {
		agents = append(agents, filepath.Join(labDir, fmt.Sprintf("node%d", i)))
	}
	for _, dir := range agents {
		cmd := exec.CommandContext(ctx, o.skiff, append([]string{"images", "import", "--agent-data-dir", dir}, archives...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return labDir, down, fmt.Errorf("importing images into %s: %v: %s", dir, err, tail(out, 2000))
		}
	}
	logf("images imported into %d nodes' containerd", len(agents))
	return labDir, down, nil
}

// imagesOnly builds the images o.images lists and leaves the lab up with them.
func imagesOnly(ctx context.Context, o options, src Sources) error {
	archives, notBuilt, err := BuildImages(src, strings.Split(o.images, ","), filepath.Join(o.work, "images"))
	if err != nil {
		return err
	}
	if len(notBuilt) > 0 {
		return fmt.Errorf("no builder for %s", strings.Join(notBuilt, " "))
	}
	labDir, down, err := labWithImages(ctx, o, archives)
	if err != nil {
		down()
		return err
	}
	logf("lab %s is up with %d images; its kubeconfig: %s", o.lab, len(archives), filepath.Join(labDir, "admin.kubeconfig"))
	return nil
}
