package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/kubejob"
)

// jobFlags are the job command's settings.
type jobFlags struct {
	pod        string
	container  string
	image      string
	namespace  string
	deadline   time.Duration
	ttl        time.Duration
	wait       bool
	dryRun     bool
	out        string
	kubeconfig string
	privileged bool
}

func newJobCmd() *cobra.Command {
	var f jobFlags
	cmd := &cobra.Command{
		Use:   "job --pod NS/NAME --image IMAGE [--wait] -- observe|train [ARGS...]",
		Short: "Run observe or train as a Kubernetes Job on the node of a pod, outputs back through the API",
		Long: `Job runs 'temper-train observe' or 'temper-train train' for a pod as a Kubernetes
Job on that pod's node, and brings the outputs back through the API server.

It reads the pod (its node, its tolerations) and creates, labelled
temper.codes/run=RUN:

  Job             on the pod's node (required node affinity on metadata.name),
                  hostPID, the node's cgroup tree and kernel BTF mounted, root
                  with capabilities BPF, PERFMON, SYS_RESOURCE (+ SYS_NICE for
                  train) and all others dropped (--privileged instead where the
                  runtime's seccomp/AppArmor policy refuses bpf()), backoffLimit 0,
                  activeDeadlineSeconds from --deadline, ttlSecondsAfterFinished
                  from --ttl
  ServiceAccount  the Job's pod runs as it
  Role(s), RoleBinding(s)
                  get on the one target pod; get and update on the run's ConfigMap
  ConfigMap       created empty; the pod fills it with its outputs: the summary it
                  printed, the profile (train), REPORT.md, snapshot.json,
                  analysis.json, the ledger, the gzipped trace, most important
                  first; what does not fit in a ConfigMap's 1 MiB is left out whole
                  and the note says so; a profile is never cut

The Job is created suspended and owns the other objects, so they exist before
its pod starts and go with it after --ttl. The arguments after the stage are
that command's own (see 'temper-train observe --help', 'temper-train train
--help'); the job adds --pod, --container, --node and --out itself.

--wait follows the run: on success it prints the summary and writes every output
under --out (the profile at profiles/ID/SHAPE.toml); a failed run, a run past
its deadline, and a target pod deleted mid-run are one-line errors (exit 1; the
last also deletes the Job). --dry-run prints the manifests as YAML instead of
creating them.

Before creating anything the job asks the API server whether you may
(SelfSubjectAccessReview) and names the first permission missing. See
docs/cluster.md.`,
		Example: `  # trace shop/checkout's app container for 20 s on its node, wait, keep the outputs in ./checkout
  temper-train job --pod shop/checkout --container app --image registry.example/temper-train:v1 \
      --wait --out checkout -- observe --duration 20s

  # train a profile for it in the temper-system namespace, the benchmark shipped in the image
  temper-train job --pod shop/checkout --image registry.example/temper-train:v1 --namespace temper-system \
      --deadline 45m --wait -- train --id checkout --max-time 30m --bench 'checkout-bench --csv'

  # the manifests only
  temper-train job --pod shop/checkout --image registry.example/temper-train:v1 --dry-run -- observe`,
		RunE: func(cmd *cobra.Command, a []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash != 0 || len(a) == 0 {
				return usageError{errors.New("give the stage after --: temper-train job --pod NS/NAME --image IMAGE -- observe|train [ARGS...]")}
			}
			return runJob(cmd, f, a[0], a[1:])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.pod, "pod", "", "the pod to trace or train for, NAMESPACE/NAME (required)")
	fl.StringVar(&f.container, "container", "", "only this container of the pod")
	fl.StringVar(&f.image, "image", "", "container image with temper-train on PATH (required)")
	fl.StringVar(&f.namespace, "namespace", "", "namespace of the Job (default: the pod's)")
	fl.DurationVar(&f.deadline, "deadline", 30*time.Minute, "the Job's activeDeadlineSeconds: it is stopped after this long")
	fl.DurationVar(&f.ttl, "ttl", time.Hour, "the Job's ttlSecondsAfterFinished: it and its objects are deleted this long after it ends")
	fl.BoolVar(&f.wait, "wait", false, "follow the run, print its outputs and write them under --out")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the manifests as YAML; create nothing")
	fl.StringVar(&f.out, "out", "", "with --wait: directory for the outputs (default ./RUN)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fl.BoolVar(&f.privileged, "privileged", false, "run the container privileged instead of with the listed capabilities")
	cmd.AddCommand(newJobExecCmd())
	return cmd
}

func runJob(cmd *cobra.Command, f jobFlags, stage string, stageArgs []string) error {
	if stage != kubejob.StageObserve && stage != kubejob.StageTrain {
		return usageError{fmt.Errorf("stage %q: the job runs observe or train", stage)}
	}
	podNS, podName, ok := strings.Cut(f.pod, "/")
	if !ok || podNS == "" || podName == "" || strings.Contains(podName, "/") {
		return usageError{fmt.Errorf("--pod %q: write it as NAMESPACE/NAME, e.g. --pod shop/checkout", f.pod)}
	}
	if f.image == "" {
		return usageError{errors.New("no --image: give an image with temper-train on PATH")}
	}
	if f.out != "" && !f.wait {
		return usageError{errors.New("--out is where --wait writes the outputs: add --wait")}
	}
	if f.wait && f.ttl < time.Minute {
		// The TTL controller deletes the Job, and with it the
		// ConfigMap, this long after it ends: --wait must get there first.
		return usageError{fmt.Errorf("--ttl %s with --wait: give at least 1m, so that the outputs are still there to read", f.ttl)}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	stderr := cmd.ErrOrStderr()
	l, err := kubejob.Launch(ctx, kubejob.LaunchOptions{Kubeconfig: f.kubeconfig, PodNamespace: podNS, PodName: podName,
		Spec: kubejob.Spec{Container: f.container, Image: f.image, Namespace: f.namespace, Stage: stage, Args: stageArgs,
			Deadline: f.deadline, TTL: f.ttl, Privileged: f.privileged},
		DryRun: f.dryRun, Wait: f.wait, Created: func(o *kubejob.Objects, node string) {
			ns, run := o.Job.Namespace, o.Job.Name
			fmt.Fprintf(stderr, "job %s/%s created for pod %s on node %s; outputs go to configmap %s/%s (kubectl get configmap %s -n %s -o yaml)\n",
				ns, run, f.pod, node, ns, run, run, ns)
		}})
	var be *kubejob.BuildError
	switch {
	case errors.As(err, &be):
		return usageError{jobFlagError(be.Err)}
	case errors.Is(err, kubejob.ErrDeadline):
		return fmt.Errorf("%w: give a longer --deadline", err)
	case err != nil:
		return err
	case f.dryRun:
		y, err := l.Objects.YAML()
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(y)
		return err
	case !f.wait:
		return nil
	}
	dir := f.out
	if dir == "" {
		dir = l.Objects.Job.Name
	}
	return writeJobOutputs(cmd.OutOrStdout(), stderr, dir, l.Outputs, l.Note)
}

// writeJobOutputs prints the summary and writes every output under dir,
// each file whole or not at all.
func writeJobOutputs(stdout, stderr io.Writer, dir string, outs []kubejob.Output, note string) error {
	for _, o := range outs {
		if o.Key == kubejob.KeySummary {
			if _, err := stdout.Write(o.Data); err != nil {
				return err
			}
		}
	}
	if note != "" {
		// The note says which outputs were left out: a shorter trace
		// makes them smaller.
		fmt.Fprintf(stderr, "note: %s (shorten --duration to make them smaller)\n", note)
	}
	paths, err := kubejob.WriteOutputs(dir, outs)
	for i, path := range paths {
		what := ""
		if outs[i].Key == kubejob.KeyProfile {
			what = " (the profile)"
		}
		fmt.Fprintf(stderr, "wrote %s%s\n", path, what)
	}
	return err
}

// newJobExecCmd is what the Job's container runs: the stage, then its
// outputs published into the run's ConfigMap.
func newJobExecCmd() *cobra.Command {
	var configMap string
	cmd := &cobra.Command{
		Use:    "exec --configmap NAME -- observe|train ARGS...",
		Short:  "Inside a job's pod: run the stage and publish its outputs to the run's ConfigMap",
		Hidden: true,
		RunE: func(cmd *cobra.Command, a []string) error {
			if cmd.ArgsLenAtDash() != 0 || len(a) == 0 {
				return usageError{errors.New("job exec runs a stage: job exec --configmap NAME -- observe|train ARGS")}
			}
			if configMap == "" {
				return usageError{errors.New("job exec: no --configmap")}
			}
			return runJobExec(cmd, configMap, a)
		},
	}
	cmd.Flags().StringVar(&configMap, "configmap", "", "the run's ConfigMap, in this pod's namespace")
	return cmd
}

// runJobExec runs the stage in the Job's pod (the one place the CLI
// re-enters itself) and publishes its outputs to the run's ConfigMap.
func runJobExec(cmd *cobra.Command, configMap string, stageArgs []string) error {
	stage := stageArgs[0]
	if stage != kubejob.StageObserve && stage != kubejob.StageTrain {
		return usageError{fmt.Errorf("job exec: stage %q: want observe or train", stage)}
	}
	client, ns, err := kubejob.InCluster()
	if err != nil {
		return err
	}
	n, err := client.Exec(context.Background(), ns, configMap, stage, kubejob.OutDir, cmd.OutOrStdout(), cmd.ErrOrStderr(),
		func(stdout, stderr io.Writer) error {
			root := newRootCmd(stdout, stderr)
			root.SetArgs(stageArgs)
			return root.Execute()
		})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "job exec: published %d outputs to configmap %s/%s\n", n, ns, configMap)
	return nil
}

// jobFlagError names the flag behind a kubejob.SpecError (the library names
// the Spec field); other errors pass unchanged.
func jobFlagError(err error) error {
	var se *kubejob.SpecError
	if !errors.As(err, &se) {
		return err
	}
	switch se.Field {
	case "Image":
		return errors.New("no --image: give an image with temper-train on PATH, e.g. --image registry.example/temper-train:v1")
	case "Deadline":
		return fmt.Errorf("--deadline %s: %s", se.Value, se.Want)
	case "TTL":
		return fmt.Errorf("--ttl %s: %s", se.Value, se.Want)
	}
	return err
}
