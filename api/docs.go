package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"gopkg.in/yaml.v3"
)

// The API reference is rendered on the server, once, from the document:
// one self-contained HTML page (styles inline, no script, no external
// asset), so that it works air-gapped, without JavaScript, and says
// exactly what the server enforces.

//go:embed docs.html.tmpl
var docsTemplate string

// ProblemType is one entry of the document's x-problem-types: a problem
// the API answers with, explained under /docs#problem/<slug>.
type ProblemType struct {
	Slug        string `json:"slug"`
	Title       string `json:"title"`
	Status      int    `json:"status"`
	Description string `json:"description"`
}

// ProblemTypes returns the problem types the document explains.
func ProblemTypes(doc *openapi3.T) ([]ProblemType, error) {
	raw, ok := doc.Extensions["x-problem-types"]
	if !ok {
		return nil, fmt.Errorf("api: the document has no x-problem-types")
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var out []ProblemType
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("api: x-problem-types: %w", err)
	}
	return out, nil
}

type docsPage struct {
	Title, Version string
	Description    template.HTML
	Tags           []docsTag
	Schemas        []docsSchema
	Problems       []docsProblem
}

type docsTag struct {
	Name        string
	Description template.HTML
	Ops         []docsOp
}

type docsOp struct {
	ID, Method, Path, Summary string
	Description               template.HTML
	Params                    []docsField
	Body                      []docsContent
	Responses                 []docsResponse
}

type docsField struct {
	Name, In    string
	Type        template.HTML
	Required    bool
	Constraints []string
	Description template.HTML
}

type docsContent struct {
	MediaType string
	Type      template.HTML
	Examples  []docsExample
}

type docsExample struct {
	Summary, Text string
}

type docsResponse struct {
	Status      string
	Class       string
	Description template.HTML
	Contents    []docsContent
}

type docsSchema struct {
	Name        string
	Description template.HTML
	Type        template.HTML
	Constraints []string
	Props       []docsField
}

type docsProblem struct {
	Slug, Title string
	Status      int
	Description template.HTML
}

// RenderDocs renders the API reference page of doc.
func RenderDocs(doc *openapi3.T) ([]byte, error) {
	problems, err := ProblemTypes(doc)
	if err != nil {
		return nil, err
	}
	md := newMarkdown(problems)
	page := docsPage{Title: doc.Info.Title, Version: doc.Info.Version, Description: md.render(doc.Info.Description)}

	byTag := map[string][]docsOp{}
	for _, path := range pathOrder(doc) {
		item := doc.Paths.Value(path)
		for _, method := range methodOrder(item) {
			op := item.GetOperation(method)
			o := docsOp{ID: op.OperationID, Method: method, Path: path, Summary: op.Summary, Description: md.render(op.Description)}
			for _, pr := range append(slices.Clone(item.Parameters), op.Parameters...) {
				p := pr.Value
				f := docsField{Name: p.Name, In: p.In, Required: p.Required, Description: md.render(p.Description)}
				if p.Schema != nil {
					f.Type, f.Constraints = typeHTML(p.Schema), constraints(p.Schema.Value)
				}
				if p.Example != nil {
					f.Constraints = append(f.Constraints, "example: "+compactJSON(p.Example))
				}
				o.Params = append(o.Params, f)
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				o.Body = contents(op.RequestBody.Value.Content)
			}
			for _, status := range statusOrder(op.Responses) {
				rv := op.Responses.Value(status).Value
				r := docsResponse{Status: status, Class: "s" + status[:1], Contents: contents(rv.Content)}
				if rv.Description != nil {
					r.Description = md.render(*rv.Description)
				}
				o.Responses = append(o.Responses, r)
			}
			tag := "Other"
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			byTag[tag] = append(byTag[tag], o)
		}
	}
	for _, t := range doc.Tags {
		if ops := byTag[t.Name]; len(ops) > 0 {
			page.Tags = append(page.Tags, docsTag{Name: t.Name, Description: md.render(t.Description), Ops: ops})
			delete(byTag, t.Name)
		}
	}
	if ops := byTag["Other"]; len(ops) > 0 {
		page.Tags = append(page.Tags, docsTag{Name: "Other", Ops: ops})
	}

	names := make([]string, 0, len(doc.Components.Schemas))
	for name := range doc.Components.Schemas {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := doc.Components.Schemas[name].Value
		ds := docsSchema{Name: name, Description: md.render(s.Description), Type: typeHTML(&openapi3.SchemaRef{Value: s}), Constraints: constraints(s)}
		props := make([]string, 0, len(s.Properties))
		for p := range s.Properties {
			props = append(props, p)
		}
		sort.Slice(props, func(i, j int) bool {
			ri, rj := slices.Contains(s.Required, props[i]), slices.Contains(s.Required, props[j])
			if ri != rj {
				return ri
			}
			return props[i] < props[j]
		})
		for _, p := range props {
			ref := s.Properties[p]
			ds.Props = append(ds.Props, docsField{
				Name: p, Type: typeHTML(ref), Required: slices.Contains(s.Required, p),
				Constraints: constraints(ref.Value), Description: md.render(ref.Value.Description),
			})
		}
		page.Schemas = append(page.Schemas, ds)
	}
	for _, p := range problems {
		page.Problems = append(page.Problems, docsProblem{Slug: p.Slug, Title: p.Title, Status: p.Status, Description: md.render(p.Description)})
	}

	tmpl, err := template.New("docs").Funcs(template.FuncMap{"lower": strings.ToLower}).Parse(docsTemplate)
	if err != nil {
		return nil, fmt.Errorf("api: docs template: %w", err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, page); err != nil {
		return nil, fmt.Errorf("api: render docs: %w", err)
	}
	return buf.Bytes(), nil
}

// pathOrder lists the document's paths in the order Spec writes them
// (grouped by purpose there), then any others sorted.
func pathOrder(doc *openapi3.T) []string {
	var order []string
	var root yaml.Node
	if yaml.Unmarshal(Spec, &root) == nil && len(root.Content) == 1 {
		m := root.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == "paths" {
				p := m.Content[i+1]
				for j := 0; j+1 < len(p.Content); j += 2 {
					if doc.Paths.Value(p.Content[j].Value) != nil {
						order = append(order, p.Content[j].Value)
					}
				}
			}
		}
	}
	var rest []string
	for path := range doc.Paths.Map() {
		if !slices.Contains(order, path) {
			rest = append(rest, path)
		}
	}
	sort.Strings(rest)
	return append(order, rest...)
}

func methodOrder(item *openapi3.PathItem) []string {
	var out []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"} {
		if item.GetOperation(m) != nil {
			out = append(out, m)
		}
	}
	return out
}

func statusOrder(rs *openapi3.Responses) []string {
	var out []string
	for status := range rs.Map() {
		out = append(out, status)
	}
	sort.Strings(out) // three digits, then "default"
	return out
}

func contents(c openapi3.Content) []docsContent {
	types := make([]string, 0, len(c))
	for mt := range c {
		types = append(types, mt)
	}
	sort.Strings(types)
	var out []docsContent
	for _, mt := range types {
		m := c[mt]
		dc := docsContent{MediaType: mt}
		if m.Schema != nil {
			dc.Type = typeHTML(m.Schema)
		}
		if m.Example != nil {
			dc.Examples = append(dc.Examples, docsExample{Text: exampleText(m.Example)})
		}
		names := make([]string, 0, len(m.Examples))
		for name := range m.Examples {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			ex := m.Examples[name].Value
			if ex == nil {
				continue
			}
			summary := ex.Summary
			if summary == "" {
				summary = name
			}
			dc.Examples = append(dc.Examples, docsExample{Summary: summary, Text: exampleText(ex.Value)})
		}
		out = append(out, dc)
	}
	return out
}

// typeHTML names a schema's type, linking to named schemas.
func typeHTML(ref *openapi3.SchemaRef) template.HTML {
	if ref == nil {
		return ""
	}
	if name, ok := strings.CutPrefix(ref.Ref, "#/components/schemas/"); ok {
		return template.HTML(`<a href="#schema-` + template.HTMLEscapeString(name) + `">` + template.HTMLEscapeString(name) + `</a>`)
	}
	s := ref.Value
	if s == nil {
		return ""
	}
	alts := s.OneOf
	if len(alts) == 0 {
		alts = s.AnyOf
	}
	if len(alts) == 0 && len(s.AllOf) == 1 {
		return typeHTML(s.AllOf[0])
	}
	if len(alts) > 0 {
		parts := make([]string, len(alts))
		for i, a := range alts {
			parts[i] = string(typeHTML(a))
		}
		return template.HTML(strings.Join(parts, " | "))
	}
	var t string
	switch {
	case s.Type.Is("array"):
		return template.HTML("array of " + string(typeHTML(s.Items)))
	case s.Type.Is("object") && s.AdditionalProperties.Schema != nil:
		return template.HTML("map of " + string(typeHTML(s.AdditionalProperties.Schema)))
	case s.Type != nil && len(*s.Type) > 0:
		t = (*s.Type)[0]
	default:
		t = "any"
	}
	if s.Format != "" && s.Format != "int32" && s.Format != "double" {
		t += " (" + s.Format + ")"
	}
	if s.Nullable {
		t += " | null"
	}
	return template.HTML(template.HTMLEscapeString(t))
}

// constraints lists what a schema restricts, briefly.
func constraints(s *openapi3.Schema) []string {
	if s == nil {
		return nil
	}
	var out []string
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, v := range s.Enum {
			vals[i] = fmt.Sprint(v)
		}
		out = append(out, "one of: "+strings.Join(vals, ", "))
	}
	if s.Pattern != "" {
		out = append(out, "pattern: "+s.Pattern)
	}
	switch {
	case s.Min != nil && s.Max != nil:
		out = append(out, "range: "+num(*s.Min)+" … "+num(*s.Max))
	case s.Min != nil:
		out = append(out, "minimum: "+num(*s.Min))
	case s.Max != nil:
		out = append(out, "maximum: "+num(*s.Max))
	}
	if s.MinLength > 0 && s.Pattern == "" {
		out = append(out, "min length: "+strconv.FormatUint(s.MinLength, 10))
	}
	if s.MinItems > 0 {
		out = append(out, "min items: "+strconv.FormatUint(s.MinItems, 10))
	}
	if s.MaxItems != nil {
		out = append(out, "max items: "+strconv.FormatUint(*s.MaxItems, 10))
	}
	if s.UniqueItems {
		out = append(out, "no repeats")
	}
	if s.Default != nil {
		out = append(out, "default: "+compactJSON(s.Default))
	}
	return out
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func compactJSON(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if a, ok := v.([]any); ok {
		parts := make([]string, len(a))
		for i, x := range a {
			parts[i] = compactJSON(x)
		}
		return strings.Join(parts, ",")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// exampleText shows an example value: text as is, anything else as JSON,
// indented, with arrays of scalars (points) kept on one line.
func exampleText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b strings.Builder
	writeJSON(&b, v, "")
	return b.String()
}

func writeJSON(b *strings.Builder, v any, indent string) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			b.WriteString("{}")
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if flat(x) && len(keys) <= 6 {
			b.WriteString("{")
			for i, k := range keys {
				if i > 0 {
					b.WriteString(", ")
				}
				kb, _ := json.Marshal(k)
				b.Write(kb)
				b.WriteString(": ")
				writeJSON(b, x[k], indent)
			}
			b.WriteString("}")
			return
		}
		b.WriteString("{\n")
		for i, k := range keys {
			kb, _ := json.Marshal(k)
			b.WriteString(indent + "  ")
			b.Write(kb)
			b.WriteString(": ")
			writeJSON(b, x[k], indent+"  ")
			if i < len(keys)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(indent + "}")
	case []any:
		if len(x) == 0 || flat(x) {
			b.WriteString("[")
			for i, e := range x {
				if i > 0 {
					b.WriteString(", ")
				}
				writeJSON(b, e, indent)
			}
			b.WriteString("]")
			return
		}
		b.WriteString("[\n")
		for i, e := range x {
			b.WriteString(indent + "  ")
			writeJSON(b, e, indent+"  ")
			if i < len(x)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(indent + "]")
	default:
		vb, err := json.Marshal(x)
		if err != nil {
			vb = []byte(fmt.Sprint(x))
		}
		b.Write(vb)
	}
}

// flat reports whether a value holds only scalars, or arrays of scalars
// (rows of points), so that it reads well on one line.
func flat(v any) bool {
	scalar := func(e any) bool {
		switch e.(type) {
		case map[string]any, []any:
			return false
		}
		return true
	}
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if !scalar(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if a, ok := e.([]any); ok {
				for _, ee := range a {
					if !scalar(ee) {
						return false
					}
				}
			} else if !scalar(e) {
				return false
			}
		}
		return true
	}
	return true
}

// markdown renders the little markdown the descriptions use: paragraphs,
// "- " lists, `code` and **bold**. Code naming a problem type links to it.
type markdown struct {
	problems map[string]bool
}

func newMarkdown(problems []ProblemType) *markdown {
	m := &markdown{problems: map[string]bool{}}
	for _, p := range problems {
		m.problems[p.Slug] = true
	}
	return m
}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	boldSpan = regexp.MustCompile(`\*\*([^*]+)\*\*`)
)

func (m *markdown) inline(text string) string {
	s := template.HTMLEscapeString(text)
	s = codeSpan.ReplaceAllStringFunc(s, func(c string) string {
		inner := c[1 : len(c)-1]
		if m.problems[inner] {
			return `<a href="#problem/` + inner + `"><code>` + inner + `</code></a>`
		}
		return "<code>" + inner + "</code>"
	})
	return boldSpan.ReplaceAllString(s, "<strong>$1</strong>")
}

func (m *markdown) render(text string) template.HTML {
	text = strings.TrimSpace(text)
	if text == "" {
		return ""
	}
	var b strings.Builder
	for _, block := range strings.Split(text, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if strings.HasPrefix(lines[0], "- ") {
			var items []string
			for _, l := range lines {
				if strings.HasPrefix(l, "- ") {
					items = append(items, strings.TrimPrefix(l, "- "))
				} else if len(items) > 0 {
					items[len(items)-1] += " " + strings.TrimSpace(l)
				}
			}
			b.WriteString("<ul>")
			for _, it := range items {
				b.WriteString("<li>" + m.inline(it) + "</li>")
			}
			b.WriteString("</ul>")
			continue
		}
		for i := range lines {
			lines[i] = strings.TrimSpace(lines[i])
		}
		b.WriteString("<p>" + m.inline(strings.Join(lines, " ")) + "</p>")
	}
	return template.HTML(b.String())
}
