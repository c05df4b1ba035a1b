package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/target"
)

// targetFlags name a live workload on this node: observe traces it, apply
// changes how its threads are scheduled. Both resolve it with
// target.
type targetFlags struct {
	pid        int
	cgroup     string
	pod        string
	container  string
	kubeconfig string
	node       string
}

// register adds --pid, --cgroup, --pod, --container, --kubeconfig and
// --node to cmd; verb says what the command does to the target ("trace").
func (f *targetFlags) register(cmd *cobra.Command, verb string) {
	fl := cmd.Flags()
	fl.IntVar(&f.pid, "pid", 0, verb+" this process, all its threads and its descendants")
	fl.StringVar(&f.cgroup, "cgroup", "", verb+" every process in this cgroup (absolute path, or relative to a cgroup mount)")
	fl.StringVar(&f.pod, "pod", "", verb+" this Kubernetes pod (NAMESPACE/NAME) running on this node")
	fl.StringVar(&f.container, "container", "", "with --pod: "+verb+" only this container")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig for --pod (default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fl.StringVar(&f.node, "node", "", "this node's Kubernetes name for --pod (default: the host name)")
}

// given reports whether any of --pid, --cgroup and --pod was set.
func (f *targetFlags) given() bool { return f.pid != 0 || f.cgroup != "" || f.pod != "" }

// spec is the target the flags name, for target.Resolve.
func (f *targetFlags) spec() target.Spec {
	return target.Spec{Pid: f.pid, Cgroup: f.cgroup, Pod: f.pod, Container: f.container,
		Kubeconfig: f.kubeconfig, NodeName: f.node}
}

// splitDash splits a subcommand's arguments at "--": its own arguments
// before it and the command to run after it (nil without "--").
func splitDash(cmd *cobra.Command, a []string) (args, command []string) {
	if dash := cmd.ArgsLenAtDash(); dash >= 0 {
		return a[:dash], a[dash:]
	}
	return a, nil
}

// commandAfterDash is the command after "--" of a subcommand that takes no
// argument of its own (nil without "--").
func commandAfterDash(cmd *cobra.Command, a []string) ([]string, error) {
	args, command := splitDash(cmd, a)
	if len(args) == 0 {
		return command, nil
	}
	if command != nil {
		return nil, usageError{fmt.Errorf("unexpected argument %q before --", args[0])}
	}
	return nil, usageError{fmt.Errorf("unexpected argument %q (a command to run goes after --)", args[0])}
}
