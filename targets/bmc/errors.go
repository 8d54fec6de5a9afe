package bmc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The error bodies follow the Redfish specification (DSP0266, "Error responses"): an "error"
// object with a code and message and @Message.ExtendedInfo, one Message from the Base
// registry (Base.1.8) each, which sushy (sushy/exceptions.py) and gofish
// (common.ConstructError) read.
const baseRegistry = "Base.1.8."

func writeError(w http.ResponseWriter, status int, id, message, resolution string, args ...string) {
	if args == nil {
		args = []string{}
	}
	severity := "Warning"
	if status >= 500 || status == http.StatusNotFound {
		severity = "Critical"
	}
	writeJSON(w, status, obj{"error": obj{
		"code":    baseRegistry + id,
		"message": message,
		"@Message.ExtendedInfo": []obj{{
			"@odata.type":     "#Message.v1_1_1.Message",
			"MessageId":       baseRegistry + id,
			"Message":         message,
			"MessageArgs":     args,
			"Severity":        severity,
			"MessageSeverity": severity,
			"Resolution":      resolution,
		}},
	}})
}

func writeJSON(w http.ResponseWriter, status int, o obj) {
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("OData-Version", "4.0")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func notFound(w http.ResponseWriter, path string) {
	writeError(w, http.StatusNotFound, "ResourceMissingAtURI", fmt.Sprintf("The resource at the URI %s was not found.", path),
		"Place a valid resource at the URI or correct the URI and resubmit the request.", path)
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "OperationNotAllowed", fmt.Sprintf("The HTTP method %s is not allowed on %s; allowed: %s.", r.Method, r.URL.Path, allow),
		"Use one of the allowed methods.")
}

func notInList(w http.ResponseWriter, value, property string, allowed []string) {
	writeError(w, http.StatusBadRequest, "PropertyValueNotInList",
		fmt.Sprintf("The value %s for the property %s is not in the list of acceptable values; AllowableValues: %s.", value, property, strings.Join(allowed, ", ")),
		"Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed.",
		value, property)
}

func malformed(w http.ResponseWriter, err error) {
	writeError(w, http.StatusBadRequest, "MalformedJSON", "The request body submitted was malformed JSON and could not be parsed by the receiving service: "+err.Error()+".",
		"Ensure that the request body is valid JSON and resubmit the request.")
}

// readBody decodes a JSON request body (at most 1 MiB) into v; an empty body is {}. On error it
// answers 400 MalformedJSON and returns false.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		malformed(w, err)
		return false
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		b = []byte("{}")
	}
	if err := json.Unmarshal(b, v); err != nil {
		malformed(w, err)
		return false
	}
	return true
}

// internal answers 500 GeneralError with the error's text (libvirt's message; never a
// credential: none is in any error the BMC makes).
func (s *Server) internal(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNoDomain) {
		writeError(w, http.StatusNotFound, "ResourceNotFound", "The requested system no longer exists.", "Provide a valid resource identifier and resubmit the request.", "ComputerSystem")
		return
	}
	s.logf("error: %v", err)
	writeError(w, http.StatusInternalServerError, "GeneralError", "A general error has occurred: "+err.Error()+".", "None.")
}
