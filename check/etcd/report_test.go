package etcd

import (
	"bytes"
	"encoding/xml"
	"html"
	"io"
	"strings"
	"testing"
)

// wellFormed parses the page as XML, strictly, and returns the text of the elements with class.
func wellFormed(t *testing.T, page []byte) map[string][]string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(page))
	dec.Strict = true
	byClass := map[string][]string{}
	var stack []string
	var text []*strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("report is not well-formed: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			class := ""
			for _, a := range tok.Attr {
				if a.Name.Local == "class" {
					class = a.Value
				}
			}
			stack = append(stack, class)
			text = append(text, &strings.Builder{})
		case xml.CharData:
			for _, b := range text {
				b.Write(tok)
			}
		case xml.EndElement:
			class := stack[len(stack)-1]
			if class != "" {
				byClass[class] = append(byClass[class], text[len(text)-1].String())
			}
			stack, text = stack[:len(stack)-1], text[:len(text)-1]
		}
	}
	if len(stack) != 0 {
		t.Fatal("unclosed elements")
	}
	return byClass
}

func TestReportOfFailingHistory(t *testing.T) {
	h := scenario(t)
	res := mustCheck(t, h)
	var stale, drop mutation
	for _, m := range mutations {
		switch m.name {
		case "stale read":
			stale = m
		case "drop an event":
			drop = m
		}
	}
	for _, m := range []mutation{stale, drop} {
		t.Run(m.name, func(t *testing.T) {
			mh := cloneHistory(t, h)
			m.apply(mh, res, func(int) int { return 0 })
			mres := mustCheck(t, mh)
			var page bytes.Buffer
			if err := WriteReport(&page, mh, mres); err != nil {
				t.Fatal(err)
			}
			byClass := wellFormed(t, page.Bytes())
			rows := byClass["violation"]
			if len(rows) != len(mres.Violations) {
				t.Fatalf("report lists %d violations, result has %d", len(rows), len(mres.Violations))
			}
			if v := mres.Violations[0]; !strings.Contains(rows[0], string(v.Guarantee)) || !strings.Contains(rows[0], v.Message) {
				t.Fatalf("violation row %q does not show %s: %s", rows[0], v.Guarantee, v.Message)
			}
			bad := byClass["op bad"]
			if m.want != Linearizable {
				bad = byClass["resp bad"]
			}
			if len(bad) == 0 {
				t.Fatal("the timeline marks nothing in red")
			}
			if !bytes.Contains(page.Bytes(), []byte(`<iframe title="porcupine" srcdoc="`)) {
				t.Fatal("no porcupine visualisation")
			}
			// the embedded visualisation is the porcupine page itself, escaped
			if start := bytes.Index(page.Bytes(), []byte(`srcdoc="`)); !strings.Contains(html.UnescapeString(string(page.Bytes()[start:start+200])), "<html") {
				t.Fatal("srcdoc does not hold an HTML page")
			}
		})
	}
}

func TestReportOfPassingHistory(t *testing.T) {
	h := scenario(t)
	res := mustCheck(t, h)
	var page bytes.Buffer
	if err := WriteReport(&page, h, res); err != nil {
		t.Fatal(err)
	}
	byClass := wellFormed(t, page.Bytes())
	if len(byClass["violation"]) != 0 || len(byClass["ok"]) != 1 {
		t.Fatalf("passing report: %v", byClass["ok"])
	}
	if len(byClass["op"])+len(byClass["op failed"]) == 0 || len(byClass["resp"]) == 0 {
		t.Fatal("timeline is empty")
	}
	if err := WriteReport(&page, nil, res); err == nil {
		t.Fatal("WriteReport without a history succeeded")
	}
}
