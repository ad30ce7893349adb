/* graph export for `minfer viz`: JSON (valid JSON, names escaped) and Graphviz DOT. */
#include "graph/graph_internal.h"
#include "quant/quant.h"

#include <stdio.h>

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

int mf_graph_write_json(const mf_graph *g, FILE *f) {
    if (!g || !f) return MF_E_INVAL;
    fputs("{\"nodes\":[", f);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const mf_node *n = &g->nodes[i];
        fprintf(f, "%s\n{\"id\":%d,\"name\":", i ? "," : "", i);
        json_str(f, n->name);
        fputs(",\"op\":", f);
        json_str(f, mf_op_name(n->op));
        fputs(",\"type\":", f);
        json_str(f, mf_type_name(n->type));
        fputs(",\"ne\":[", f);
        for (int d = 0; d < n->n_dims; d++) fprintf(f, "%s%lld", d ? "," : "", (long long)n->ne[d]);
        fputs("],\"src\":[", f);
        int k = 0;
        for (int s = 0; s < MF_MAX_SRC; s++)
            if (n->src[s] >= 0) fprintf(f, "%s%d", k++ ? "," : "", n->src[s]);
        fprintf(f, "],\"layer\":%d,\"backend\":%d", n->layer, n->backend);
        if (n->flags & MF_NODE_OUTPUT) fputs(",\"output\":true", f);
        fputc('}', f);
    }
    fputs("\n]}\n", f);
    return ferror(f) ? MF_E_IO : 0;
}

static void dot_str(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fputc('\\', f);
        if (*p >= 0x20) fputc(*p, f);
    }
}

static const char *backend_name(int32_t b) {
    switch (b) {
    case -1:
        return "unassigned";
    case 0:
        return "cpu";
    case 1:
        return "metal";
    case 2:
        return "cuda";
    default:
        return "backend?";
    }
}

int mf_graph_write_dot(const mf_graph *g, FILE *f) {
    if (!g || !f) return MF_E_INVAL;
    fputs("digraph minfer {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n", f);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const mf_node *n = &g->nodes[i];
        fprintf(f, "  n%d [label=\"", i);
        dot_str(f, n->name[0] ? n->name : "");
        fprintf(f, "%s%s\\n[", n->name[0] ? "\\n" : "", mf_op_name(n->op));
        for (int d = 0; d < n->n_dims; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)n->ne[d]);
        fprintf(f, "] %s\\nlayer %d  %s\"", mf_type_name(n->type), n->layer, backend_name(n->backend));
        if (mf_op_is_leaf(n->op))
            fputs(", style=filled, fillcolor=\"#e8e8e8\"", f);
        else if (n->flags & MF_NODE_OUTPUT)
            fputs(", style=filled, fillcolor=\"#c8e6c9\"", f);
        else if (n->view_src >= 0)
            fputs(", style=dashed", f);
        fputs("];\n", f);
        for (int s = 0; s < MF_MAX_SRC; s++)
            if (n->src[s] >= 0) fprintf(f, "  n%d -> n%d;\n", n->src[s], i);
    }
    fputs("}\n", f);
    return ferror(f) ? MF_E_IO : 0;
}
