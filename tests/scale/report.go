package scale

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func mib(b uint64) string { return fmt.Sprintf("%d MiB", b>>20) }

// Markdown is the results as tables: one row per run, then the SLOs, then each run's slowest
// server-side calls; with two targets at one size, the ratios skiff/upstream.
func Markdown(rs []Result) string {
	var b strings.Builder
	b.WriteString("| target | nodes | pods | Services | nodes Ready | burst | pods Running/s | scheduled/s | start-up p50 / p99 | RSS end | anon end | anon/pod | peak anon | CPU | etcd db | watches |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %s | %.0f | %.0f | %s / %s | %s | %s | %.0f KiB | %s | %s | %.0f MiB | %.0f |\n",
			r.Target, r.Nodes, r.Pods, r.Services, round(r.NodesReady), round(r.Burst),
			r.BurstStartup.RunsPerSec, r.BurstStartup.SchedulePerSec,
			round(r.BurstStartup.Running.P50), round(r.BurstStartup.Running.P99),
			mib(r.End.RSS), mib(r.End.Anon), r.AnonPerPod()/1024, mib(r.PeakAnon), r.CPU.Round(time.Second),
			float64(r.EtcdDB)/(1<<20), r.Watchers)
	}
	if ratios := Ratios(rs); ratios != "" {
		b.WriteString("\n" + ratios)
	}
	b.WriteString("\nSLOs (upstream's, p99 over the burst and churn; every call of a class must meet it):\n\n")
	b.WriteString("| target | nodes | SLO | limit | p99 | verdict | worst |\n|---|---:|---|---:|---:|---|---|\n")
	for _, r := range rs {
		for _, s := range r.SLOs {
			verdict := "pass"
			if !s.Pass {
				verdict = "**FAIL**"
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", r.Target, r.Nodes, s.Name, s.Limit, round(s.P99), verdict, s.Worst)
		}
	}
	b.WriteString("\nThe churn's pods, first seen → scheduled and → Running (p50 / p99, pods):\n\n")
	for _, r := range rs {
		c := r.ChurnStartup
		fmt.Fprintf(&b, "- %s, %d nodes: scheduled %s / %s (%d), Running %s / %s (%d)\n", r.Target, r.Nodes,
			round(c.Scheduled.P50), round(c.Scheduled.P99), c.Scheduled.Count, round(c.Running.P50), round(c.Running.P99), c.Running.Count)
	}
	fanouts := false
	for _, r := range rs {
		if f := r.Fanout; f != nil {
			if !fanouts {
				b.WriteString("\nWatch fan-out (simulated agents: their pods by node, every Service, every EndpointSlice):\n\n")
				b.WriteString("| target | nodes | agents | watches | anon before → open | per watch | bytes carried | broken | new Service → every agent p50 / p99 / last |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
				fanouts = true
			}
			per := 0.0
			if f.Open.Anon > f.Before.Anon && f.Streams > 0 {
				per = float64(f.Open.Anon-f.Before.Anon) / float64(f.Streams) / 1024
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %s → %s | %.1f KiB | %.0f MiB | %d | %s / %s / %s |\n", r.Target, r.Nodes, f.Agents, f.Streams,
				mib(f.Before.Anon), mib(f.Open.Anon), per, float64(f.Bytes)/(1<<20), f.Broken, round(f.Delivery.P50), round(f.Delivery.P99), round(f.Slowest))
		}
	}
	b.WriteString("\nSlowest calls by the server's own histograms (p50 / p99, calls):\n\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "- %s, %d nodes: ", r.Target, r.Nodes)
		for i, c := range r.Server {
			if i == 6 {
				break
			}
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s %s / %s (%d)", c.Call, round(c.P50), round(c.P99), c.Count)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Ratios compares skiff with upstream at each size both ran: anonymous memory per pod, CPU,
// and pods Running per second.
func Ratios(rs []Result) string {
	var b strings.Builder
	for _, s := range rs {
		if s.Target != "skiff" {
			continue
		}
		for _, u := range rs {
			if u.Target != "upstream" || u.Nodes != s.Nodes || u.AnonPerPod() == 0 || u.CPU == 0 {
				continue
			}
			fmt.Fprintf(&b, "- %d nodes, skiff/upstream: anonymous memory per pod %.2fx, CPU %.2fx, peak anonymous %.2fx, pods Running/s %.2fx\n",
				s.Nodes, s.AnonPerPod()/u.AnonPerPod(), s.CPU.Seconds()/u.CPU.Seconds(),
				float64(s.PeakAnon)/float64(u.PeakAnon), s.BurstStartup.RunsPerSec/u.BurstStartup.RunsPerSec)
		}
	}
	return b.String()
}

// WriteResults writes results.json, RESULTS.md's table and one memory plot per size.
func WriteResults(dir string, rs []Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), js, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "table.md"), []byte(Markdown(rs)), 0o644); err != nil {
		return err
	}
	sizes := map[int][]Result{}
	for _, r := range rs {
		sizes[r.Nodes] = append(sizes[r.Nodes], r)
	}
	for n, group := range sizes {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("memory-%d.svg", n)), []byte(PlotSVG(group)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// PlotSVG draws anonymous memory (solid) and CPU cores in use (dashed) over the run for
// each result of one size, with the phases marked.
func PlotSVG(rs []Result) string {
	const w, h, left, bottom, top, right = 720.0, 360.0, 60.0, 40.0, 30.0, 60.0
	var maxT, maxMem, maxCores float64
	for _, r := range rs {
		for i, s := range r.Samples {
			maxT = max(maxT, s.At.Seconds())
			maxMem = max(maxMem, float64(s.Anon)/(1<<20))
			if i > 0 {
				maxCores = max(maxCores, cores(r.Samples[i-1], s))
			}
		}
	}
	if maxT == 0 || maxMem == 0 {
		return `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>`
	}
	maxCores = max(maxCores, 1)
	x := func(t float64) float64 { return left + t/maxT*(w-left-right) }
	yMem := func(m float64) float64 { return h - bottom - m/maxMem*(h-bottom-top) }
	yCPU := func(c float64) float64 { return h - bottom - c/maxCores*(h-bottom-top) }
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="13">%d nodes: anonymous memory (solid, MiB) and CPU cores (dashed) over the run</text>`+"\n", left, rs[0].Nodes)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top, left, h-bottom)
	for i := 0; i <= 4; i++ {
		m := maxMem * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%.0f</text>`+"\n", left-4, yMem(m)+4, m)
		c := maxCores * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%.1f</text>`+"\n", w-right+4, yCPU(c)+4, c)
		t := maxT * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%.0f s</text>`+"\n", x(t), h-bottom+16, t)
	}
	for i, r := range rs {
		color := colors[i%len(colors)]
		var mem, cpu strings.Builder
		for j, s := range r.Samples {
			fmt.Fprintf(&mem, "%.1f,%.1f ", x(s.At.Seconds()), yMem(float64(s.Anon)/(1<<20)))
			if j > 0 {
				fmt.Fprintf(&cpu, "%.1f,%.1f ", x(s.At.Seconds()), yCPU(cores(r.Samples[j-1], s)))
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, mem.String())
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1" stroke-dasharray="4 3" opacity="0.6" points="%s"/>`+"\n", color, cpu.String())
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="%s">%s</text>`+"\n", left+10, top+14+float64(i)*14, color, r.Target)
		for _, p := range r.Phases {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="%s" stroke-dasharray="1 3" opacity="0.5"/>`+"\n", x(p.At.Seconds()), top, x(p.At.Seconds()), h-bottom, color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="%s" opacity="0.7" transform="rotate(-90 %.1f %.0f)">%s</text>`+"\n", x(p.At.Seconds())+3, h-bottom-4, color, x(p.At.Seconds())+3, h-bottom-4, p.Name)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// cores is the CPU used between two samples, in cores.
func cores(a, b Sample) float64 {
	dt := (b.At - a.At).Seconds()
	if dt <= 0 {
		return 0
	}
	return (b.CPU - a.CPU).Seconds() / dt
}
