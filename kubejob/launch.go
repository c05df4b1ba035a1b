package kubejob

import (
	"context"
	"time"

	"temper.codes/temper-train/internal/kube"
)

// LaunchOptions configure Launch.
type LaunchOptions struct {
	// Kubeconfig names the client's configuration; "" chooses as kubectl
	// does ($KUBECONFIG, ~/.kube/config, else in-cluster).
	Kubeconfig string
	// PodNamespace and PodName name the target pod. Launch reads it and
	// fills in Spec.Pod and Spec.RunID.
	PodNamespace, PodName string
	Spec                  Spec
	// DryRun builds the objects and creates nothing.
	DryRun bool
	// Wait follows the run to its end and collects its outputs.
	Wait bool
	// Created, when set, is told once the objects exist, with the node
	// the Job runs on.
	Created func(o *Objects, node string)
}

// Launched is a run Launch built, and with LaunchOptions.Wait its
// outputs.
type Launched struct {
	Objects *Objects
	Outputs []Output
	// Note says which outputs did not fit in the ConfigMap ("" when all
	// did).
	Note string
}

// BuildError is a Spec Build refused, as Launch returns it: a *SpecError
// naming the field, or a pod, stage or argument the job cannot run with.
type BuildError struct{ Err error }

func (e *BuildError) Error() string { return e.Err.Error() }
func (e *BuildError) Unwrap() error { return e.Err }

// Launch runs a stage as a Job on the target pod's node: it reads the pod,
// builds the run's objects, asks the API server whether the caller may
// create them (and, with Wait, follow the run), creates them, and with
// Wait follows the run (Client.Wait) and reads its outputs. With DryRun it
// returns the objects without creating anything. A Spec Build refuses is
// a *BuildError; the other errors are Client's.
func Launch(ctx context.Context, opts LaunchOptions) (*Launched, error) {
	src, err := kube.DefaultSource(opts.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg, err := kube.Config(src)
	if err != nil {
		return nil, err
	}
	client, err := NewClient(cfg, src)
	if err != nil {
		return nil, err
	}
	pod, err := client.Pod(ctx, opts.PodNamespace, opts.PodName)
	if err != nil {
		return nil, err
	}
	s := opts.Spec
	s.Pod, s.RunID = pod, NewRunID(s.Stage, opts.PodName, time.Now())
	objs, err := Build(s)
	if err != nil {
		return nil, &BuildError{err}
	}
	l := &Launched{Objects: objs}
	if opts.DryRun {
		return l, nil
	}
	if err := client.Check(ctx, Permissions(objs, opts.Wait)); err != nil {
		return l, err
	}
	if err := client.Create(ctx, objs); err != nil {
		return l, err
	}
	if opts.Created != nil {
		opts.Created(objs, pod.Spec.NodeName)
	}
	if !opts.Wait {
		return l, nil
	}
	cm, err := client.Wait(ctx, objs, opts.PodNamespace, opts.PodName)
	if err != nil {
		return l, err
	}
	l.Note = cm.Annotations[AnnotationNote]
	l.Outputs, err = Outputs(cm)
	return l, err
}
