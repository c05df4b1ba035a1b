package analyze

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"temper.codes/temper-train/observe"
)

// targetTrace has: process 100 (threads 100, 101) which forks process 200
// inside the trace (whose thread 201 appears later); two single-threaded
// processes named "postgres" (300, 301); a kworker; a kernel thread known
// by its parent (kthreadd); one known only by sleeping in state I; and an
// unrelated user process 400.
func targetTrace() *trace {
	b := newTrace().
		thread(100, 100, "app").thread(101, 100, "app-io").
		thread(300, 300, "postgres").thread(301, 301, "postgres").
		thread(40, 40, "kworker/0:1").
		thread(50, 50, "flush-worker").process(50, 2).
		thread(60, 60, "mystery").
		thread(400, 400, "other").process(400, 1)
	b.sw(0, 0, 0, stR, 100).
		fork(10, 0, 100, 200, "app-child").
		sw(20, 0, 100, stS, 200).
		sw(30, 0, 200, stS, 101).
		sw(40, 0, 101, stS, 300).
		sw(50, 0, 300, stS, 301).
		sw(60, 0, 301, stS, 40).
		sw(70, 0, 40, stI, 50).
		sw(80, 0, 50, stS, 60).
		sw(90, 0, 60, stI, 400).
		sw(100, 0, 400, stS, 0)
	// Thread 201 of the forked process appears with its thread group.
	b.evs = append(b.evs, observe.Event{TS: us(110), Kind: observe.KindThreadInfo, CPU: -1, Pid: -1, Tid: 201, Tgid: 200, Comm: "app-child"})
	b.comm[201] = "app-child"
	b.sw(120, 0, 0, stR, 201).sw(130, 0, 201, stS, 0)
	return b
}

func tids(a *Analysis) []int32 {
	var out []int32
	for _, th := range a.Threads {
		out = append(out, th.Tid)
	}
	slices.Sort(out)
	return out
}

func TestTargetSelection(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		want []int32
		desc string
	}{
		{"pid follows forks", Options{Pids: []int{100}}, []int32{100, 101, 200, 201}, "forked inside the trace"},
		{"two pids", Options{Pids: []int{300, 400}}, []int32{300, 400}, "tgids 300,400 from --pid"},
		{"process name, many processes", Options{Process: "postgres"}, []int32{300, 301}, `processes named "postgres"`},
		{"all user threads", Options{}, []int32{100, 101, 200, 201, 300, 301, 400}, "every user thread"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := targetTrace().analyze(t, c.opts)
			if got := tids(a); !slices.Equal(got, c.want) {
				t.Errorf("target %v, want %v", got, c.want)
			}
			if !strings.Contains(a.Target.Description, c.desc) {
				t.Errorf("description %q does not say %q", a.Target.Description, c.desc)
			}
		})
	}
}

func TestKernelThreadRule(t *testing.T) {
	a := targetTrace().analyze(t, Options{})
	for _, tid := range []int32{40, 50, 60} {
		if slices.Contains(tids(a), tid) {
			t.Errorf("kernel thread %d analysed as a user thread", tid)
		}
	}
	if !slices.ContainsFunc(a.Notes, func(n string) bool { return strings.Contains(n, "every user thread") }) {
		t.Errorf("notes %q do not say that every user thread was analysed", a.Notes)
	}
}

func TestTargetErrors(t *testing.T) {
	cases := []struct {
		opts Options
		want string
	}{
		{Options{Pids: []int{999}}, "no thread of process 999 in the trace"},
		{Options{Process: "nginx"}, `no process named "nginx" in the trace (processes seen: app, app-child, other, postgres)`},
		{Options{Pids: []int{0}}, "pid 0: not a process id"},
		{Options{Pids: []int{100}, Process: "app"}, "not both"},
	}
	for _, c := range cases {
		_, err := Trace(targetTrace().reader(), c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.opts, err, c.want)
		}
	}
	_, err := Trace(newTrace().thread(1, 1, "x").reader(), Options{})
	if !errors.Is(err, ErrNoEvents) {
		t.Errorf("empty trace: %v, want ErrNoEvents", err)
	}
}

func TestParsePids(t *testing.T) {
	cases := []struct {
		in      string
		want    []int
		wantErr string
	}{
		{"", nil, ""},
		{"19560", []int{19560}, ""},
		{"1, 2,3", []int{1, 2, 3}, ""},
		{"abc", nil, `"abc": "abc" is not a process id`},
		{"0", nil, `"0" is not a process id`},
		{"1,,2", nil, `"1,,2": "" is not a process id`},
		{"-4", nil, "not a process id"},
	}
	for _, c := range cases {
		got, err := ParsePids(c.in)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParsePids(%q) = %v, %v; want an error saying %q", c.in, got, err, c.wantErr)
			}
		case err != nil || !slices.Equal(got, c.want):
			t.Errorf("ParsePids(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}
