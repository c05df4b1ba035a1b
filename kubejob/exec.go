package kubejob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/client-go/rest"

	"temper.codes/temper-train/internal/kube"
)

// stderrTail is how much of the stage's stderr a failed run publishes.
const stderrTail = 4 << 10

// InCluster connects to the API server as the pod this process runs in,
// with its service account, which is what the container of a run's Job
// (job exec) publishes with. It returns the client and the pod's
// namespace, where the run's ConfigMap is.
func InCluster() (*Client, string, error) {
	// In the pod the service account is the only credential, and it is
	// what says this runs in a cluster.
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, "", fmt.Errorf("job exec runs inside a job's pod, with its service account: %w", err)
	}
	ns := kube.InClusterNamespace()
	if ns == "" {
		return nil, "", errors.New("job exec: the service account's namespace file is missing")
	}
	c, err := NewClient(cfg, kube.Source{InCluster: true})
	if err != nil {
		return nil, "", err
	}
	return c, ns, nil
}

// Exec is the run's side inside its Job's pod: it runs the stage and
// publishes what the stage left in dir (OutDir in the pod; see Collect)
// into the run's ConfigMap ns/configMap. run runs the stage writing to the writers it is
// given, which copy to stdout and stderr and keep the stage's whole
// standard output and the end of its standard error for the ConfigMap.
// The ConfigMap is read first, so that a run that could not publish fails
// before the stage runs.
//
// A stage that fails is published as failed, with its error and its
// stderr's tail, and Exec returns its error. When publishing fails Exec
// says so in the ConfigMap too, if it can be written at all, and returns
// that error. Otherwise it returns how many outputs it published.
func (c *Client) Exec(ctx context.Context, ns, configMap, stage, dir string, stdout, stderr io.Writer, run func(stdout, stderr io.Writer) error) (int, error) {
	if _, err := c.ConfigMap(ctx, ns, configMap); err != nil {
		return 0, err
	}
	var out bytes.Buffer
	tail := &tailBuffer{max: stderrTail}
	stageErr := run(io.MultiWriter(stdout, &out), io.MultiWriter(stderr, tail))

	status := StatusSucceeded
	if stageErr != nil {
		status = StatusFailed
	}
	outs, err := Collect(stage, dir, out.Bytes(), stageErr, tail.b)
	if err == nil {
		err = c.Publish(ctx, ns, configMap, status, outs)
	}
	if err != nil {
		msg := fmt.Sprintf("publishing the outputs of %s failed: %v\n", stage, err)
		if stageErr != nil {
			msg = stageErr.Error() + "\n" + msg
		}
		_ = c.Publish(ctx, ns, configMap, StatusFailed, []Output{{Key: KeyError, Path: KeyError, Data: []byte(msg), Required: true}})
		return 0, fmt.Errorf("job exec: %w", err)
	}
	if stageErr != nil {
		return 0, fmt.Errorf("%s: %w", stage, stageErr)
	}
	return len(outs), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}
