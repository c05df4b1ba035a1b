package record

import "fmt"

// ParseAttach reads an attach mode as a person names it: "auto"
// (AttachAuto), "tp_btf" (AttachBTF) or "raw_tp" (AttachRawTP). Any other
// name is an *OptionError for Attach.
func ParseAttach(name string) (string, error) {
	switch name {
	case "auto":
		return AttachAuto, nil
	case AttachBTF, AttachRawTP:
		return name, nil
	}
	return "", &OptionError{Field: "Attach", Want: `"auto", "tp_btf" or "raw_tp"`, Got: fmt.Sprintf("%q", name)}
}
