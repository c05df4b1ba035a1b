package snapshot

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestFetchAgent(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL + "/observe"
	closed.Close()

	tests := []struct {
		name       string
		handler    http.HandlerFunc // nil: use closedURL
		timeout    time.Duration
		wantStatus int
		wantBody   string // compact JSON, "" for none
		wantText   string
		wantErr    string // "" for OK
	}{
		{
			name: "json",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/observe" || r.Method != http.MethodGet {
					http.Error(w, "wrong request", http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"profile":"batch-v3","cpus":[0,1]}`))
			},
			wantStatus: 200, wantBody: `{"profile":"batch-v3","cpus":[0,1]}`,
		},
		{
			name: "server error with json body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusInternalServerError)
				w.Write([]byte(`{"error":"scheduler not attached"}`))
			},
			wantStatus: 500, wantBody: `{"error":"scheduler not attached"}`, wantErr: "HTTP 500",
		},
		{
			name: "not json",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.Write([]byte("<html>login</html>"))
			},
			wantStatus: 200, wantText: "<html>login</html>", wantErr: "not JSON",
		},
		{
			name: "slow",
			handler: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
			timeout: 50 * time.Millisecond, wantErr: "deadline exceeded",
		},
		{name: "closed port", wantErr: "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := closedURL
			if tt.handler != nil {
				srv := httptest.NewServer(tt.handler)
				defer srv.Close()
				url = srv.URL + "/observe"
			}
			f := fetchAgent(context.Background(), &http.Client{}, url, tt.timeout)
			if f.Status != tt.wantStatus {
				t.Errorf("status %d, want %d", f.Status, tt.wantStatus)
			}
			if string(f.Body) != tt.wantBody {
				t.Errorf("body %q, want %q", f.Body, tt.wantBody)
			}
			if f.BodyText != tt.wantText {
				t.Errorf("body text %q, want %q", f.BodyText, tt.wantText)
			}
			if tt.wantErr == "" {
				if !f.OK() || f.Error != "" {
					t.Errorf("error %q, want none", f.Error)
				}
			} else if f.OK() || !strings.Contains(f.Error, tt.wantErr) || !strings.Contains(f.Error, url) {
				t.Errorf("error %q, want it to name %s and mention %q", f.Error, url, tt.wantErr)
			}
			if f.FetchedAt.IsZero() || f.DurationNs <= 0 {
				t.Errorf("fetched at %v in %d ns", f.FetchedAt, f.DurationNs)
			}
		})
	}
}

// TestAgentInSnapshot: the agent is asked at Begin and End, its answer is
// kept verbatim, and an agent that goes away is a warning, not a failure.
func TestAgentInSnapshot(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Write([]byte(`{"call": 1}`))
	}))
	ctx := context.Background()
	s, err := Begin(ctx, Options{Tgids: []int{os.Getpid()}, AgentURL: srv.URL + "/observe"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close() // the agent dies during the trace
	if err := s.End(ctx); err != nil {
		t.Fatalf("End failed because the agent is gone: %v", err)
	}
	if calls.Load() != 1 || s.Agent == nil || !s.Agent.Begin.OK() || string(s.Agent.Begin.Body) != `{"call": 1}` {
		t.Errorf("agent at begin: %d calls, %+v", calls.Load(), s.Agent)
	}
	if s.Agent.End == nil || s.Agent.End.OK() {
		t.Errorf("agent at end: %+v, want a failed fetch", s.Agent.End)
	}
	if !slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.HasPrefix(w, "end: agent ") }) {
		t.Errorf("warnings %q, want the dead agent", s.Warnings)
	}
	// Serialized, the body is JSON inside the snapshot, not a string.
	var out strings.Builder
	if err := s.Write(&out); err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Agent struct {
			Begin struct {
				Body map[string]int `json:"body"`
			} `json:"begin"`
		} `json:"agent"`
	}
	if err := json.Unmarshal([]byte(out.String()), &raw); err != nil || raw.Agent.Begin.Body["call"] != 1 {
		t.Errorf("agent body in JSON: %+v, %v", raw, err)
	}

	// Unreachable from the start: still a snapshot, with a warning.
	s, err = Begin(ctx, Options{Tgids: []int{os.Getpid()}, AgentURL: srv.URL + "/observe", AgentTimeout: time.Second})
	if err != nil {
		t.Fatalf("Begin failed because the agent is unreachable: %v", err)
	}
	if !slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.HasPrefix(w, "begin: agent ") }) {
		t.Errorf("warnings %q, want the unreachable agent", s.Warnings)
	}
}

func TestTruncateText(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 3, "hel"},
		{"héllo", 2, "h\uFFFD"}, // é cut in half
		{"\xff\xfe", 10, "\uFFFD"},
	} {
		if got := truncateText([]byte(tt.in), tt.n); got != tt.want {
			t.Errorf("truncateText(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
