package profiles

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// ReadPod reads the PodInfo of a pod as `kubectl get pod -o json` prints
// it: its annotations and its containers' images. Only those fields are
// read; an error names the file and, for JSON that is not a pod, the line
// and field.
func ReadPod(path string) (PodInfo, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return PodInfo{}, err
	}
	// The fields of a core/v1 Pod that resolution looks at.
	var pod struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Containers []struct {
				Image string `json:"image"`
			} `json:"containers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(data, &pod); err != nil {
		return PodInfo{}, fmt.Errorf("%s: not a pod as kubectl get pod -o json prints it: %w", path, podJSONError(data, err))
	}
	if pod.Kind != "" && pod.Kind != "Pod" {
		return PodInfo{}, fmt.Errorf("%s: kind is %q, want Pod", path, pod.Kind)
	}
	info := PodInfo{Annotations: pod.Metadata.Annotations}
	for _, c := range pod.Spec.Containers {
		info.Images = append(info.Images, c.Image)
	}
	return info, nil
}

// podJSONError adds the line to a JSON syntax error, and says which field
// of a type error holds what instead of what.
func podJSONError(data []byte, err error) error {
	line := func(off int64) int {
		return 1 + strings.Count(string(data[:min(int(off), len(data))]), "\n")
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("line %d: %w", line(se.Offset), err)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "the document"
		}
		return fmt.Errorf("line %d: %s: JSON %s where %s is expected", line(te.Offset), field, te.Value, jsonKind(te.Type))
	}
	return err
}

// jsonKind says what JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

// Candidates are the profiles resolution chooses among: the builtins, then
// the profiles tree in dir (LoadDir), whose files replace builtins of the
// same id and shape (Resolve). dir "" means the builtins alone.
func Candidates(dir string) ([]Candidate, error) {
	cands := BuiltinCandidates()
	if dir == "" {
		return cands, nil
	}
	files, err := LoadDir(dir)
	if err != nil {
		return nil, err
	}
	return append(cands, files...), nil
}

// ParseMillicores reads a Kubernetes CPU quantity ("2250m", "2.25", "3")
// as millicores, the unit of traits.cpu_request_millicores and
// LintOptions.RequestMillicores. It must be positive and fit an int32.
func ParseMillicores(s string) (int, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a CPU quantity (e.g. 2250m or 2.25): %w", s, err)
	}
	m := q.MilliValue()
	if m <= 0 || m > 1<<31-1 {
		return 0, fmt.Errorf("%q: want a positive CPU quantity", s)
	}
	return int(m), nil
}
