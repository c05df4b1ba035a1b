package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// DefaultAgentTimeout bounds one request to the node agent when
// Options.AgentTimeout is zero.
const DefaultAgentTimeout = 5 * time.Second

// maxAgentBody caps how much of the agent's answer is kept; a larger body is
// treated as a failed fetch rather than held in memory.
const maxAgentBody = 16 << 20

// maxAgentText caps the non-JSON text kept for diagnosis.
const maxAgentText = 4 << 10

// Agent is what the node agent's /observe endpoint answered at the
// beginning and at the end of the trace.
type Agent struct {
	URL   string      `json:"url"`
	Begin *AgentFetch `json:"begin"`
	End   *AgentFetch `json:"end"` // nil before End
}

// AgentFetch is one GET of the agent's endpoint.
type AgentFetch struct {
	FetchedAt  time.Time `json:"fetched_at"`
	DurationNs int64     `json:"duration_ns"`
	Status     int       `json:"status,omitempty"` // HTTP status; 0 when no response came
	// Body is the response body verbatim when it is JSON.
	Body json.RawMessage `json:"body,omitempty"`
	// BodyText is the start of a body that is not JSON, kept for diagnosis.
	BodyText string `json:"body_text,omitempty"`
	// Error says why the fetch is not usable; empty when Body holds a
	// 2xx JSON answer.
	Error string `json:"error,omitempty"`
}

// OK reports whether the fetch produced a 2xx JSON body.
func (f *AgentFetch) OK() bool { return f != nil && f.Error == "" }

// fetchAgent GETs url within timeout. It never fails: every problem (no
// answer, a non-2xx status, a body that is not JSON) is described in
// AgentFetch.Error, because an agent that is down must not cost the trace.
func fetchAgent(ctx context.Context, client *http.Client, url string, timeout time.Duration) *AgentFetch {
	if timeout <= 0 {
		timeout = DefaultAgentTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	f := &AgentFetch{FetchedAt: time.Now().UTC()}
	start := time.Now()
	defer func() { f.DurationNs = int64(time.Since(start)) }()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		f.Error = fmt.Sprintf("agent %s: %v", url, err)
		return f
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		f.Error = fmt.Sprintf("agent %s: %v", url, err)
		return f
	}
	defer resp.Body.Close()
	f.Status = resp.StatusCode
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAgentBody+1))
	if err != nil {
		f.Error = fmt.Sprintf("agent %s: read body: %v", url, err)
		return f
	}
	if len(body) > maxAgentBody {
		f.Error = fmt.Sprintf("agent %s: body larger than %d bytes", url, maxAgentBody)
		return f
	}
	if json.Valid(body) {
		f.Body = json.RawMessage(body)
	} else {
		f.BodyText = truncateText(body, maxAgentText)
	}
	switch {
	case resp.StatusCode/100 != 2:
		f.Error = fmt.Sprintf("agent %s: HTTP %s", url, resp.Status)
	case f.Body == nil:
		f.Error = fmt.Sprintf("agent %s: body is not JSON (%d bytes, Content-Type %q)", url, len(body), resp.Header.Get("Content-Type"))
	}
	return f
}

// truncateText returns at most the first n bytes of b, with invalid UTF-8
// (binary bodies, or a character cut in two) replaced by U+FFFD.
func truncateText(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
