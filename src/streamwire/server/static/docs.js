// streamwire's /docs: renders the OpenAPI document served beside it. No dependency, no CDN.
"use strict";
(function () {
  const METHODS = ["get", "put", "post", "delete", "patch", "head", "options"];
  let doc = {};

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value !== undefined && value !== null) node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  // "#/components/schemas/Name" -> the object it names
  function resolve(ref) {
    let node = doc;
    for (const part of ref.replace(/^#\//, "").split("/")) {
      node = node ? node[part.replace(/~1/g, "/").replace(/~0/g, "~")] : undefined;
    }
    return node || {};
  }
  function deref(node) {
    let seen = 0;
    while (node && node.$ref && seen++ < 20) node = resolve(node.$ref);
    return node || {};
  }
  function refName(ref) { return ref.split("/").pop(); }

  // A schema as a short TypeScript-like text; named schemas stay names (listed at the end).
  function describe(schema, depth) {
    if (!schema || typeof schema !== "object") return "any";
    if (schema.$ref) return refName(schema.$ref);
    if (depth > 6) return "…";
    const pad = "  ".repeat(depth + 1), end = "  ".repeat(depth);
    if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
    if (schema.const !== undefined) return JSON.stringify(schema.const);
    for (const key of ["oneOf", "anyOf"]) {
      if (schema[key]) return schema[key].map((s) => describe(s, depth)).join(" | ");
    }
    if (schema.allOf) return schema.allOf.map((s) => describe(s, depth)).join(" & ");
    let type = schema.type;
    if (Array.isArray(type)) return type.join(" | ");
    if (type === "array") return "[" + describe(schema.items, depth) + ", …]";
    if (type === "object" || schema.properties) {
      const props = schema.properties || {};
      const required = new Set(schema.required || []);
      const lines = Object.entries(props).map(([name, sub]) =>
        pad + name + (required.has(name) ? "" : "?") + ": " + describe(sub, depth + 1));
      if (schema.additionalProperties && typeof schema.additionalProperties === "object") {
        lines.push(pad + "[key]: " + describe(schema.additionalProperties, depth + 1));
      }
      return lines.length ? "{\n" + lines.join(",\n") + "\n" + end + "}" : "object";
    }
    const facts = [];
    for (const key of ["minimum", "maximum", "minLength", "maxLength", "pattern", "format"]) {
      if (schema[key] !== undefined) facts.push(key + " " + schema[key]);
    }
    return (type || "any") + (facts.length ? " (" + facts.join(", ") + ")" : "");
  }

  function schemaBlock(content) {
    const block = el("div");
    for (const [media, entry] of Object.entries(content || {})) {
      block.append(el("div", {class: "muted"}, media),
                   el("pre", {class: "schema"}, describe(entry.schema, 0)));
    }
    return block;
  }

  function parameters(list) {
    if (!list || !list.length) return null;
    const table = el("table", {}, el("tr", {}, el("th", {}, "name"), el("th", {}, "in"),
                                     el("th", {}, "schema"), el("th", {}, "description")));
    for (const raw of list) {
      const p = deref(raw);
      table.append(el("tr", {},
        el("td", {}, el("code", {}, p.name || ""), p.required ? el("span", {class: "req"}, " *") : null),
        el("td", {}, p.in || ""), el("td", {}, el("code", {}, describe(p.schema, 0))),
        el("td", {}, p.description || "")));
    }
    return el("div", {}, el("h4", {}, "Parameters"), table);
  }

  function responses(map) {
    const table = el("table", {}, el("tr", {}, el("th", {}, "status"), el("th", {}, "description"),
                                     el("th", {}, "body")));
    for (const [code, raw] of Object.entries(map || {})) {
      const r = deref(raw);
      table.append(el("tr", {}, el("td", {}, el("code", {}, code)), el("td", {}, r.description || ""),
                      el("td", {}, r.content ? schemaBlock(r.content) : "")));
    }
    return el("div", {}, el("h4", {}, "Responses"), table);
  }

  function operation(path, method, op, shared) {
    const id = "op-" + method + "-" + path.replace(/[^A-Za-z0-9]+/g, "-");
    const body = el("div", {class: "body"});
    if (op.description) body.append(el("p", {}, op.description));
    if (op.security && op.security.length) {
      body.append(el("p", {class: "muted"}, "Needs: " + op.security.map((s) => Object.keys(s).join(" + ")).join(" or ")));
    }
    const params = parameters([...(shared || []), ...(op.parameters || [])]);
    if (params) body.append(params);
    if (op.requestBody) {
      const rb = deref(op.requestBody);
      body.append(el("h4", {}, "Request body" + (rb.required ? " (required)" : "")), schemaBlock(rb.content));
    }
    body.append(responses(op.responses));
    return el("details", {class: "op", id: id, "data-method": method, "data-path": path},
      el("summary", {}, el("span", {class: "method " + method}, method),
         el("span", {class: "path"}, path), el("span", {class: "summary"}, op.summary || "")),
      body);
  }

  function render() {
    const info = doc.info || {};
    document.getElementById("title").textContent = (info.title || "API") + (info.version ? " (version " + info.version + ")" : "");
    document.getElementById("info").textContent = info.description || "";
    const routes = document.getElementById("routes"), toc = document.getElementById("toc");
    routes.replaceChildren();
    for (const [path, item] of Object.entries(doc.paths || {})) {
      for (const method of METHODS) {
        if (!item[method]) continue;
        const node = operation(path, method, item[method], item.parameters);
        routes.append(node);
        toc.append(el("a", {href: "#" + node.id}, method.toUpperCase() + " " + path));
      }
    }
    const schemas = (doc.components || {}).schemas || {};
    const section = document.getElementById("schemas");
    if (Object.keys(schemas).length) section.append(el("h2", {}, "Schemas"));
    for (const [name, schema] of Object.entries(schemas)) {
      section.append(el("h3", {id: "schema-" + name}, name), el("pre", {class: "schema"}, describe(schema, 0)));
    }
    document.body.dataset.rendered = String(routes.querySelectorAll(".op").length);
  }

  fetch(document.body.dataset.openapi, {headers: {Accept: "application/json"}})
    .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
    .then((json) => { doc = json; render(); })
    .catch((err) => {
      document.getElementById("routes").replaceChildren(
        el("p", {class: "error"}, "The API document could not be read: " + err.message));
      document.body.dataset.rendered = "error";
    });
})();
