package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const llamaProfile = `schema_version = 1
id = "llama"

[machine_shape]
logical_cpus = 8
cores = 4
threads_per_core = 2

[traits]
cpu_request_millicores = 2250
hot_threads = 2

[[thread_groups]]
name = "inference"
match = { comm_prefix = ["llama"] }
treatment = "exclusive"
cpu_fraction = 0.85
exclusive_cores = 2
`

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLintCommand(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "llama.toml", llamaProfile)
	oversized := writeFile(t, dir, "oversized.toml", strings.Replace(llamaProfile, "cpu_fraction = 0.85", "cpu_fraction = 0.9", 1))
	regex := writeFile(t, dir, "regex.toml", strings.Replace(llamaProfile, `comm_prefix = ["llama"]`, `comm_regex = "^llama"`, 1))
	typo := writeFile(t, dir, "typo.toml", strings.Replace(llamaProfile, "comm_prefix", "comm_prefx", 1))
	warn := writeFile(t, dir, "warn.toml", llamaProfile+"preempt = false\n\n[[thread_groups]]\nname = \"rest\"\nmatch = { all = true }\ntreatment = \"yield\"\npreempt = true\n")
	pod := writeFile(t, dir, "pod.json", `{"apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "db", "annotations": {"temper.codes/workload-profile": "mysql-innodb"}},
  "spec": {"containers": [{"name": "db", "image": "docker.io/library/redis:7"}]}}`)
	imagePod := writeFile(t, dir, "image-pod.json", `{"kind": "Pod", "metadata": {"name": "r"}, "spec": {"containers": [{"name": "r", "image": "docker.io/library/redis:7"}]}}`)
	unknownPod := writeFile(t, dir, "unknown-pod.json", `{"kind": "Pod", "metadata": {"annotations": {"infera.io/workload-profile": "mysql"}}, "spec": {"containers": [{"image": "mysql:8"}]}}`)
	badPod := writeFile(t, dir, "bad-pod.json", "{\"kind\": \"Pod\",\n \"metadata\": 3}")
	profDir := filepath.Join(dir, "profiles")
	writeFile(t, profDir, "redis/any.toml", "schema_version = 1\nid = \"redis\"\n[[thread_groups]]\nname = \"all\"\nmatch = { all = true }\ntreatment = \"latency\"\n")

	cases := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr string
	}{
		{"clean file", []string{"lint", good}, exitOK, []string{good + ": ok (sched_ext, cfs)"}, ""},
		{"0.9 × 2250m", []string{"lint", oversized}, exitFailure,
			[]string{oversized + `: error: group "inference": exclusive_cores: 2, but ceil(0.9 × 2250m) = ceil(2.025) = 3`}, "1 of 1 profiles have errors"},
		{"--request", []string{"lint", "--request", "3", good}, exitFailure, []string{"ceil(0.85 × 3000m)"}, ""},
		{"--shape too small", []string{"lint", "--shape", "4cpu-2c-smt2", good}, exitFailure,
			[]string{"needs 2 whole cores but a 2-core machine can give at most 1"}, ""},
		{"--demote", []string{"lint", "--shape", "4cpu-2c-smt2", "--demote", good}, exitOK,
			[]string{"warning: group \"inference\": exclusive_cores:", "demoted to latency"}, ""},
		{"regex fine on shipped backends", []string{"lint", regex}, exitOK, []string{"ok (sched_ext, cfs)"}, ""},
		{"regex on scx-layered", []string{"lint", "--backend", "scx-layered", regex}, exitFailure,
			[]string{`error: group "inference": match.comm_regex: [scx-layered] the scx-layered backend has no comm_regex matcher`}, ""},
		{"load error names the line", []string{"lint", typo, good}, exitFailure,
			[]string{typo + ":15: thread_groups[0].match.comm_prefx: unknown key (did you mean comm_prefix?", good + ": ok"}, "1 of 2 profiles"},
		{"warnings pass", []string{"lint", warn}, exitOK, []string{`warning: group "rest": preempt: ignored`}, ""},
		{"--strict fails on warnings", []string{"lint", "--strict", warn}, exitFailure, []string{`error: group "rest": preempt: ignored`}, ""},
		{"builtin", []string{"lint", "--builtin", "llama-cpp"}, exitOK, []string{"builtin/llama-cpp.toml: ok"}, ""},
		{"all builtins", []string{"lint", "--builtin", "all", "--backend", "cfs"}, exitOK, []string{"builtin/redis.toml: ok (cfs)", "builtin/postgres.toml: ok (cfs)"}, ""},
		{"builtin on a 2-core node", []string{"lint", "--builtin", "onnx-inference", "--shape", "4cpu-2c-smt2"}, exitFailure,
			[]string{"needs 3 whole cores but a 2-core machine can give at most 1"}, ""},
		{"explain annotation", []string{"lint", "--explain", "--pod-json", pod, "--shape", "8cpu-4c-smt2"}, exitOK,
			[]string{"annotation temper.codes/workload-profile=mysql-innodb selects id mysql-innodb", "result: mysql-innodb from builtin/mysql-innodb.toml"}, ""},
		{"explain file override", []string{"lint", "--explain", "--pod-json", imagePod, "--profiles", profDir}, exitOK,
			[]string{"no --shape: any machine shape matches", "image docker.io/library/redis:7 (as redis:7) matches", "overrides builtin redis", "result: redis from " + filepath.Join(profDir, "redis", "any.toml")}, ""},
		{"explain unknown annotation", []string{"lint", "--explain", "--pod-json", unknownPod}, exitFailure, nil,
			"annotation infera.io/workload-profile=mysql names no profile"},
		{"explain bad pod", []string{"lint", "--explain", "--pod-json", badPod}, exitFailure, nil, "bad-pod.json: not a pod as kubectl get pod -o json prints it: line 2:"},
		{"no files", []string{"lint"}, exitUsage, nil, "name profile files to lint"},
		{"bad shape", []string{"lint", "--shape", "8cpu-4c-smt3", good}, exitUsage, nil, "--shape: shape \"8cpu-4c-smt3\": logical_cpus = 8 but"},
		{"bad request", []string{"lint", "--request", "lots", good}, exitUsage, nil, "--request"},
		{"bad backend", []string{"lint", "--backend", "bpf", good}, exitUsage, nil, "unknown backend \"bpf\""},
		{"unknown builtin", []string{"lint", "--builtin", "nope"}, exitUsage, nil, "builtin profile \"nope\": unknown profile"},
		{"explain without pod", []string{"lint", "--explain"}, exitUsage, nil, "--explain needs --pod-json"},
		{"missing file", []string{"lint", filepath.Join(dir, "missing.toml")}, exitFailure, []string{"missing.toml: no such file"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, out, errOut)
			}
			for _, s := range c.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			if !strings.Contains(errOut, c.stderr) {
				t.Errorf("stderr lacks %q:\n%s", c.stderr, errOut)
			}
			if c.code == exitFailure && strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("error is not one line: %q", errOut)
			}
		})
	}
	// Lint writes nothing next to the files it reads.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 10 {
		t.Errorf("lint left files behind: %v", ents)
	}
}

func TestLintHelpHasExamples(t *testing.T) {
	code, out, _ := runCLI("lint", "--help")
	if code != exitOK || !strings.Contains(out, "Examples:") || !strings.Contains(out, "temper-train lint --explain") {
		t.Errorf("exit %d, no example in help:\n%s", code, out)
	}
}
