package discordtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// File is one attachment the bot uploaded with a callback, a webhook edit
// or a follow-up (multipart/form-data), as it arrived.
type File struct {
	// Index is n of its part's name, files[n]: the id its entry in
	// attachments names.
	Index       int
	Name        string // the part's filename
	ContentType string
	Data        []byte
}

// acceptsFiles lists the routes that take multipart/form-data: the
// payload_json part is the JSON body, each files[n] part an upload.
var acceptsFiles = map[string]bool{
	RouteInteractionCallback: true,
	RouteEditOriginal:        true,
	RouteEditFollowup:        true,
	RouteCreateFollowup:      true,
}

// Discord's limits on uploads.
const (
	maxAttachments = 10
	maxUploadBytes = 8 << 20
)

var filePartRE = regexp.MustCompile(`^files\[(0|[1-9][0-9]?)\]$`)

type filesKey struct{}

// uploaded returns the files of the request, nil when it was not
// multipart.
func uploaded(r *http.Request) []File {
	files, _ := r.Context().Value(filesKey{}).([]File)
	return files
}

// isMultipart reports whether the request's body is multipart/form-data.
func isMultipart(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// readMultipart splits a multipart/form-data body as Discord reads it:
// exactly one payload_json part (the JSON body, then checked as any JSON
// body is), and files[n] parts, each with a filename, n unique, at most
// ten. Every entry of the payload's attachments must have a string id
// naming one of the parts' n (an upload; the fake holds no earlier
// attachments to keep). Anything else is refused with Discord's form
// errors.
func readMultipart(h http.Header, body []byte) (payload []byte, files []File, errs []fieldError) {
	_, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return nil, nil, []fieldError{{[]string{"headers", "Content-Type"}, "CONTENT_TYPE_INVALID", "multipart/form-data needs a boundary"}}
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	seen := map[int]bool{}
	havePayload := false
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, []fieldError{{nil, "MULTIPART_INVALID", "The multipart body could not be read."}}
		}
		data, err := io.ReadAll(io.LimitReader(part, maxUploadBytes+1))
		if err != nil {
			return nil, nil, []fieldError{{nil, "MULTIPART_INVALID", "The multipart body could not be read."}}
		}
		name := part.FormName()
		switch m := filePartRE.FindStringSubmatch(name); {
		case name == "payload_json":
			if havePayload {
				errs = append(errs, fieldError{[]string{"payload_json"}, "MULTIPART_INVALID", "payload_json is sent once."})
			}
			havePayload = true
			payload = data
		case m != nil:
			n, _ := strconv.Atoi(m[1])
			p := []string{name}
			switch {
			case seen[n]:
				errs = append(errs, fieldError{p, "MULTIPART_INVALID", "Each files[n] is sent once."})
			case part.FileName() == "":
				errs = append(errs, fieldError{p, "BASE_TYPE_REQUIRED", "A file part needs a filename."})
			case len(data) > maxUploadBytes:
				errs = append(errs, fieldError{p, "FILE_TOO_LARGE", "Request entity too large"})
			}
			seen[n] = true
			files = append(files, File{Index: n, Name: part.FileName(), ContentType: part.Header.Get("Content-Type"), Data: data})
		default:
			errs = append(errs, fieldError{[]string{name}, "MULTIPART_INVALID", fmt.Sprintf("Unexpected form field %q.", name)})
		}
	}
	if !havePayload {
		errs = append(errs, fieldError{[]string{"payload_json"}, "BASE_TYPE_REQUIRED", "This field is required"})
	}
	if len(files) > maxAttachments {
		errs = append(errs, tooLong([]string{"files"}, maxAttachments))
	}
	if havePayload {
		errs = append(errs, checkAttachmentIDs(payload, seen)...)
	}
	return payload, files, errs
}

// checkAttachmentIDs holds a payload's attachments to the uploaded parts:
// each id a string (Discord's snowflake type) naming a files[n] sent.
func checkAttachmentIDs(payload []byte, parts map[int]bool) []fieldError {
	type withAttachments struct {
		Attachments []map[string]json.RawMessage `json:"attachments"`
	}
	var p struct {
		withAttachments
		Data *withAttachments `json:"data"` // an interaction callback's
	}
	if json.Unmarshal(payload, &p) != nil {
		return nil // the body check reports bad JSON
	}
	list, at := p.Attachments, []string{"attachments"}
	if p.Data != nil && len(p.Data.Attachments) > 0 {
		list, at = p.Data.Attachments, []string{"data", "attachments"}
	}
	var errs []fieldError
	for i, a := range list {
		path := sub(at, strconv.Itoa(i), "id")
		raw, ok := a["id"]
		var id string
		if !ok || json.Unmarshal(raw, &id) != nil {
			errs = append(errs, fieldError{path, "BASE_TYPE_TYPE", "An attachment id is a string."})
			continue
		}
		n, err := strconv.Atoi(id)
		if err != nil || strings.TrimLeft(id, "0") != strings.TrimLeft(strconv.Itoa(n), "0") || !parts[n] {
			errs = append(errs, fieldError{path, "ATTACHMENT_NOT_FOUND", fmt.Sprintf("No files[%s] part was uploaded.", id)})
		}
	}
	return errs
}
