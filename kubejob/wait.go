package kubejob

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// watchTimeout bounds one watch request; Wait opens a new one after it.
const watchTimeout = 5 * time.Minute

// Wait follows the run until its Job completes, fails or passes its
// deadline, or the target pod is deleted, and returns the run's
// ConfigMap. The errors are ErrFailed, ErrDeadline, ErrPodDeleted and
// ErrJobDeleted, in one line each. A run whose target pod was deleted is
// stopped (its Job deleted): it measures nothing any more.
func (c *Client) Wait(ctx context.Context, o *Objects, podNS, podName string) (*corev1.ConfigMap, error) {
	ns, name := o.Job.Namespace, o.Job.Name
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Cleanup(cctx, o)
	}()
	for {
		job := &batchv1.Job{}
		err := c.batch.Get().Namespace(ns).Resource("jobs").Name(name).Do(ctx).Into(job)
		if apierrors.IsNotFound(err) || err == nil && job.DeletionTimestamp != nil {
			return nil, newError(ErrJobDeleted, "job %s/%s was deleted before it finished", ns, name)
		}
		if err != nil {
			return nil, c.apiError(err, Permission{"get", "batch", "jobs", ns, name})
		}
		if done, err := c.outcome(ctx, job); done {
			return c.result(ctx, job, err)
		}
		pod := &corev1.Pod{}
		err = c.core.Get().Namespace(podNS).Resource("pods").Name(podName).Do(ctx).Into(pod)
		if apierrors.IsNotFound(err) || err == nil && (pod.DeletionTimestamp != nil || pod.UID != o.podUID()) {
			return nil, c.podGone(ctx, o, podNS, podName)
		}
		if err != nil {
			return nil, c.apiError(err, Permission{"get", "", "pods", podNS, podName})
		}

		jw, err := c.watch(ctx, c.batch, "jobs", ns, name, job.ResourceVersion)
		if err != nil {
			return nil, c.apiError(err, Permission{"watch", "batch", "jobs", ns, ""})
		}
		pw, err := c.watch(ctx, c.core, "pods", podNS, podName, pod.ResourceVersion)
		if err != nil {
			jw.Stop()
			return nil, c.apiError(err, Permission{"watch", "", "pods", podNS, ""})
		}
		cm, err, done := c.follow(ctx, o, jw, pw, podNS, podName)
		jw.Stop()
		pw.Stop()
		if done {
			return cm, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("stopped waiting for job %s/%s (%w); it keeps running: kubectl get job %s -n %s", ns, name, ctx.Err(), name, ns)
		}
	}
}

// follow reads both watches until the run ends (done) or a watch closes
// (not done: Wait reads the objects again and watches anew).
func (c *Client) follow(ctx context.Context, o *Objects, jw, pw watch.Interface, podNS, podName string) (*corev1.ConfigMap, error, bool) {
	for {
		select {
		case <-ctx.Done():
			return nil, nil, false
		case ev, ok := <-jw.ResultChan():
			if !ok {
				return nil, nil, false
			}
			switch ev.Type {
			case watch.Deleted:
				return nil, newError(ErrJobDeleted, "job %s/%s was deleted before it finished", o.Job.Namespace, o.Job.Name), true
			case watch.Error:
				return nil, nil, false
			}
			job, isJob := ev.Object.(*batchv1.Job)
			if !isJob {
				continue
			}
			if job.DeletionTimestamp != nil {
				// Deleted with finalizers (orphan or foreground
				// propagation): gone as far as this run goes.
				return nil, newError(ErrJobDeleted, "job %s/%s was deleted before it finished", o.Job.Namespace, o.Job.Name), true
			}
			if done, err := c.outcome(ctx, job); done {
				cm, err := c.result(ctx, job, err)
				return cm, err, true
			}
		case ev, ok := <-pw.ResultChan():
			if !ok {
				return nil, nil, false
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			switch {
			case ev.Type == watch.Error:
				return nil, nil, false
			case ev.Type == watch.Deleted, isPod && (pod.DeletionTimestamp != nil || pod.UID != o.podUID()):
				return nil, c.podGone(ctx, o, podNS, podName), true
			}
		}
	}
}

// podUID is the uid of the target pod the run was made for: a pod of the
// same name with another uid is a new pod, the old one is gone.
func (o *Objects) podUID() types.UID { return o.PodUID }

func (c *Client) watch(ctx context.Context, rc *rest.RESTClient, resource, ns, name, rv string) (watch.Interface, error) {
	timeout := int64(watchTimeout / time.Second)
	return rc.Get().Namespace(ns).Resource(resource).
		VersionedParams(&metav1.ListOptions{Watch: true, ResourceVersion: rv, TimeoutSeconds: &timeout,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}, metav1.ParameterCodec).
		Timeout(watchTimeout + 30*time.Second).Watch(ctx)
}

// outcome says whether the Job has ended, and how: nil for success.
func (c *Client) outcome(ctx context.Context, job *batchv1.Job) (bool, error) {
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			return true, nil
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			if cond.Reason == batchv1.JobReasonDeadlineExceeded {
				return true, newError(ErrDeadline, "job %s/%s ran past its deadline of %s (activeDeadlineSeconds) and was stopped",
					job.Namespace, job.Name, time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second)
			}
			return true, newError(ErrFailed, "job %s/%s failed (%s: %s)", job.Namespace, job.Name, cond.Reason, firstLine(cond.Message))
		}
	}
	return false, nil
}

// result reads the ConfigMap of an ended Job. A failed Job's own error,
// when its pod published one, replaces the Job's condition message.
func (c *Client) result(ctx context.Context, job *batchv1.Job, jobErr error) (*corev1.ConfigMap, error) {
	cm, err := c.ConfigMap(ctx, job.Namespace, job.Name)
	if err != nil {
		return nil, err
	}
	status := cm.Annotations[AnnotationStatus]
	switch {
	case jobErr == nil && status != StatusSucceeded:
		return cm, newError(ErrFailed, "job %s/%s completed but its configmap says %q: the pod did not publish its outputs", job.Namespace, job.Name, status)
	case jobErr != nil && cm.Data[KeyError] != "":
		if errors.Is(jobErr, ErrDeadline) {
			return cm, jobErr
		}
		return cm, newError(ErrFailed, "job %s/%s failed: %s", job.Namespace, job.Name, firstLine(cm.Data[KeyError]))
	}
	return cm, jobErr
}

// podGone stops a run whose target pod was deleted.
func (c *Client) podGone(ctx context.Context, o *Objects, podNS, podName string) error {
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	policy := metav1.DeletePropagationBackground
	err := c.batch.Delete().Namespace(o.Job.Namespace).Resource("jobs").Name(o.Job.Name).
		Body(&metav1.DeleteOptions{PropagationPolicy: &policy}).Do(dctx).Error()
	stopped := "the job was deleted"
	if err != nil && !apierrors.IsNotFound(err) {
		stopped = fmt.Sprintf("deleting the job failed (%v): kubectl delete job %s -n %s", firstLine(err.Error()), o.Job.Name, o.Job.Namespace)
	}
	return newError(ErrPodDeleted, "pod %s/%s was deleted while job %s/%s ran, so the run measured a pod that is gone; %s",
		podNS, podName, o.Job.Namespace, o.Job.Name, stopped)
}
