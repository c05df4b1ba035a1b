package kubejob

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"temper.codes/temper-train/internal/kubetest"
)

// TestWait follows runs that end each way while Wait watches: the job
// controller's status is written by the test, the pod's outputs published
// with the run's own service account.
func TestWait(t *testing.T) {
	api := testAPI.Need(t)
	for _, tc := range []struct {
		name    string
		publish []Output
		end     func(t *testing.T, o *Objects, pod *corev1.Pod)
		errIs   error
		errHas  string
	}{
		{name: "success",
			publish: []Output{{Key: KeySummary, Path: KeySummary, Data: []byte("target pod\n"), Required: true},
				{Key: KeyProfile, Path: "profiles/checkout/2cpu-2c-smt1.toml", Data: []byte("id = \"checkout\"\n"), Required: true}},
			end: func(t *testing.T, o *Objects, _ *corev1.Pod) {
				api.SetJobStatus(t, o.Job.Namespace, o.Job.Name, kubetest.JobComplete)
			}},
		{name: "failure",
			publish: []Output{{Key: KeySummary, Path: KeySummary, Required: true},
				{Key: KeyError, Path: KeyError, Data: []byte("pod shop/checkout has no container \"db\"; its containers are: app\n\nend of its stderr:\n...\n"), Required: true}},
			end: func(t *testing.T, o *Objects, _ *corev1.Pod) {
				api.SetJobStatus(t, o.Job.Namespace, o.Job.Name, kubetest.JobFailed)
			},
			errIs: ErrFailed, errHas: `failed: pod shop/checkout has no container "db"; its containers are: app`},
		{name: "deadline",
			end: func(t *testing.T, o *Objects, _ *corev1.Pod) {
				api.SetJobStatus(t, o.Job.Namespace, o.Job.Name, kubetest.JobDeadline)
			},
			errIs: ErrDeadline, errHas: "ran past its deadline of 1m0s (activeDeadlineSeconds) and was stopped"},
		{name: "pod deleted",
			end: func(t *testing.T, _ *Objects, pod *corev1.Pod) {
				if err := api.Client.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
					t.Error(err)
				}
			},
			errIs: ErrPodDeleted, errHas: "was deleted while job"},
		{name: "job deleted",
			end: func(t *testing.T, o *Objects, _ *corev1.Pod) {
				if err := api.Client.BatchV1().Jobs(o.Job.Namespace).Delete(context.Background(), o.Job.Name, metav1.DeleteOptions{}); err != nil {
					t.Error(err)
				}
			},
			errIs: ErrJobDeleted, errHas: "was deleted before it finished"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ns := newNamespace(t, api, "shop")
			pod := createPod(t, api, ns, "checkout", "node-a")
			c, o := startRun(t, api, pod, newNamespace(t, api, "temper"), nil)
			api.SetJobStatus(t, o.Job.Namespace, o.Job.Name, kubetest.JobRunning)

			type result struct {
				cm  *corev1.ConfigMap
				err error
			}
			done := make(chan result, 1)
			go func() {
				cm, err := c.Wait(ctx, o, ns, "checkout")
				done <- result{cm, err}
			}()
			// Wait is watching by now or reads the end state first;
			// either way it must see it.
			time.Sleep(300 * time.Millisecond)
			if tc.publish != nil {
				pc := clientFor(t, api, serviceAccountToken(t, api, o.Job.Namespace, o.Job.Name))
				status := StatusSucceeded
				if tc.errIs != nil {
					status = StatusFailed
				}
				if err := pc.Publish(ctx, o.Job.Namespace, o.Job.Name, status, tc.publish); err != nil {
					t.Fatal(err)
				}
			}
			tc.end(t, o, pod)
			var r result
			select {
			case r = <-done:
			case <-ctx.Done():
				t.Fatal("Wait did not return")
			}
			if tc.errIs == nil {
				if r.err != nil {
					t.Fatal(r.err)
				}
				outs, err := Outputs(r.cm)
				if err != nil {
					t.Fatal(err)
				}
				if len(outs) != 2 || outs[0].Key != KeyProfile || outs[0].Path != "profiles/checkout/2cpu-2c-smt1.toml" || string(outs[0].Data) != "id = \"checkout\"\n" {
					t.Errorf("outputs %+v", outs)
				}
			} else if !errors.Is(r.err, tc.errIs) || !strings.Contains(r.err.Error(), tc.errHas) || strings.Contains(r.err.Error(), "\n") {
				t.Errorf("Wait: %v\nwant one %v line containing %q", r.err, tc.errIs, tc.errHas)
			}
			if tc.errIs == ErrPodDeleted {
				if _, err := api.Client.BatchV1().Jobs(o.Job.Namespace).Get(ctx, o.Job.Name, metav1.GetOptions{}); err == nil {
					t.Error("the job of a deleted pod was not deleted")
				}
			}
			// The Role in the pod's namespace, which the Job cannot
			// own, is gone once Wait returns.
			if roles, _ := api.Client.RbacV1().Roles(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelRun + "=" + o.Job.Name}); len(roles.Items) != 0 {
				t.Errorf("%d roles of the run left in the pod's namespace", len(roles.Items))
			}
		})
	}
}
