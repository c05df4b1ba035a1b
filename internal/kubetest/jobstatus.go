package kubetest

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobOutcome is a state of a one-pod Job, as the job controller records it.
type JobOutcome string

// Job states SetJobStatus writes.
const (
	JobRunning  JobOutcome = "running"
	JobComplete JobOutcome = "complete"
	JobFailed   JobOutcome = "failed"
	JobDeadline JobOutcome = "deadline"
)

// SetJobStatus writes the status the job controller writes (no
// kube-controller-manager runs here) for a Job with
// one pod (backoffLimit 0) that started, or ended in outcome: start time
// and one active pod; then succeeded with SuccessCriteriaMet and Complete,
// or failed with FailureTarget and Failed (reason BackoffLimitExceeded or
// DeadlineExceeded) and a completion-less end.
func (api *Server) SetJobStatus(t testing.TB, ns, name string, outcome JobOutcome) {
	t.Helper()
	ctx := context.Background()
	job, err := api.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("job status: %v", err)
	}
	now := metav1.Now()
	st := &job.Status
	if st.StartTime == nil {
		st.StartTime = &now
	}
	cond := func(typ batchv1.JobConditionType, reason, msg string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastProbeTime: now, LastTransitionTime: now}
	}
	st.Ready = new(int32(0))
	st.Terminating = new(int32(0))
	switch outcome {
	case JobRunning:
		st.Active = 1
	case JobComplete:
		st.Active, st.Succeeded = 0, 1
		st.CompletionTime = &now
		st.Conditions = append(st.Conditions, cond(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
			cond(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"))
	case JobFailed:
		st.Active, st.Failed = 0, 1
		st.Conditions = append(st.Conditions, cond(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"),
			cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"))
	case JobDeadline:
		st.Active, st.Failed = 0, 1
		st.Conditions = append(st.Conditions, cond(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline"),
			cond(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline"))
	}
	if _, err := api.Client.BatchV1().Jobs(ns).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("job status %s: %v", outcome, err)
	}
}
