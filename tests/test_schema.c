/* JSON Schema -> GBNF (src/grammar/schema.c): every check is on the language, not the text: a schema is
 * converted, the GBNF compiled, and JSON texts the schema allows must match while texts it forbids (and
 * unbounded whitespace) must not.  Refusals: the right code, and a message naming the keyword and its path.
 */
#include "grammar/grammar.h"
#include "harness.h"

#include <stdlib.h>
#include <string.h>

/* The schema's grammar, compiled; NULL (with the reason printed) when either step fails. */
static mf_grammar *schema_grammar(const char *schema) {
    char *gbnf = NULL;
    mf_error e = {0};
    int rc = mf_json_schema_to_gbnf(schema, strlen(schema), &gbnf, &e);
    if (rc) {
        printf("  convert %s: rc %d: %s\n", schema, rc, e.msg);
        return NULL;
    }
    mf_grammar *g = NULL;
    rc = mf_grammar_compile(gbnf, strlen(gbnf), &g, &e);
    if (rc) printf("  compile of %s's grammar failed: %s\n%s", schema, e.msg, gbnf);
    free(gbnf);
    return g;
}

static bool matches(const mf_grammar *g, const char *text) {
    return mf_grammar_matches(g, text, strlen(text));
}

/* Every text in yes matches the schema's grammar, none in no does (both NULL-terminated). */
static void expect_language(const char *schema, const char *const *yes, const char *const *no) {
    mf_grammar *g = schema_grammar(schema);
    CHECK(g, "schema %s gave no grammar", schema);
    if (!g) return;
    for (; yes && *yes; yes++) CHECK(matches(g, *yes), "schema %s: %s should match", schema, *yes);
    for (; no && *no; no++) CHECK(!matches(g, *no), "schema %s: %s should not match", schema, *no);
    mf_grammar_release(g);
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_required_properties_must_appear_and_undeclared_ones_must_not(void) {
    expect_language(
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"}},"
        "\"required\":[\"name\"],\"additionalProperties\":false,\"title\":\"P\",\"description\":\"d\"}",
        L("{\"name\":\"Ann\"}", "{\"name\":\"Ann\",\"age\":31}", "{ \"name\" : \"A\" , \"age\" : -7 }",
          "{\"name\":\"\",\"age\":0}"),
        L("{}", "{\"age\":31}", "{\"name\":\"Ann\",\"age\":31,\"x\":1}", "{\"name\":\"Ann\",\"x\":1}",
          "{\"name\":7}", "{\"name\":\"Ann\",\"age\":3.5}", "{\"name\":\"Ann\",\"age\":\"31\"}",
          "{\"name\":\"Ann\",}", "{\"name\":\"Ann\",\"age\":31,}", "{\"name\":\"Ann\" \"age\":31}",
          "{\"name\":\"Ann\"", "[\"Ann\"]", "{\"name\":\"Ann\",\"age\":01}"));
    /* absent additionalProperties is as strict as false once properties are given */
    expect_language("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}}}",
                    L("{}", "{\"a\":true}"), L("{\"b\":true}", "{\"a\":true,\"b\":1}", "{\"a\":null}"));
}

static void test_optional_properties_keep_commas_right_in_every_subset(void) {
    const char *schema =
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},"
        "\"c\":{\"type\":\"integer\"}}}";
    mf_grammar *g = schema_grammar(schema);
    REQUIRE(g, "no grammar for %s", schema);
    for (int mask = 0; mask < 8; mask++) { /* all 8 subsets, in declared order */
        char t[64] = "{";
        const char *names = "abc";
        bool first = true;
        for (int i = 0; i < 3; i++) {
            if (!(mask >> i & 1)) continue;
            size_t n = strlen(t);
            snprintf(t + n, sizeof t - n, "%s\"%c\":%d", first ? "" : ",", names[i], i);
            first = false;
        }
        strcat(t, "}");
        CHECK(matches(g, t), "subset %d: %s should match", mask, t);
    }
    static const char *const bad[] = {
        "{\"b\":1,\"a\":0}", "{\"c\":1,\"b\":1}",          "{,\"a\":1}",
        "{\"a\":1,}",        "{\"a\":1,,\"b\":1}",         "{,}",
        "{\"a\":1\"b\":1}",  "{\"a\":1,\"a\":1}",          "{\"b\":1,}",
        "{,\"c\":1}",        "{\"a\":1,\"b\":2,\"c\":3,}",
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(bad); i++) CHECK(!matches(g, bad[i]), "%s should not match", bad[i]);
    mf_grammar_release(g);
    /* a required member between optional ones: it is in every text, the others around it in any subset */
    expect_language(
        "{\"properties\":{\"a\":{\"type\":\"null\"},\"b\":{\"type\":\"null\"},\"c\":{\"type\":\"null\"}},"
        "\"required\":[\"b\"]}",
        L("{\"b\":null}", "{\"a\":null,\"b\":null}", "{\"b\":null,\"c\":null}",
          "{\"a\":null,\"b\":null,\"c\":null}"),
        L("{}", "{\"a\":null}", "{\"c\":null}", "{\"a\":null,\"c\":null}", "{,\"b\":null}", "{\"b\":null,}"));
}

static void test_whitespace_between_tokens_is_bounded(void) {
    char wide[128];
    snprintf(wide, sizeof wide, "{\"a\":1,%30s\"b\":2}", "");
    char wide_arr[128];
    snprintf(wide_arr, sizeof wide_arr, "[1,%30s2]", "");
    const char *schema =
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}}}";
    expect_language(
        schema, L("{\"a\":1, \"b\":2}", "{\n  \"a\": 1,\n  \"b\": 2\n}", "{\"a\" :1 ,\"b\": 2 }"),
        L(wide, "{\"a\":1,\n\n\n\"b\":2}", "{\"a\":1,  \"b\":2}", "{\"a\":1,\t\"b\":2}", " {\"a\":1}"));
    expect_language("{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", L("[1, 2]", "[\n\t1,\n\t2\n]"),
                    L(wide_arr));
    expect_language("true", L("{\"k\": [1, {\"x\": null}]}"), L(wide, wide_arr));
}

static void test_recursive_ref_builds_trees_of_any_depth(void) {
    const char *schema =
        "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{"
        "\"type\":\"array\","
        "\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/node\"}";
    expect_language(
        schema,
        L("{\"v\":1}", "{\"v\":1,\"kids\":[]}",
          "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3},{\"v\":4,\"kids\":[]}]},{\"v\":5}]}"),
        L("{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"w\":3}]}]}", "{\"v\":1,\"kids\":[{}]}", "{\"kids\":[]}"));
    /* the root itself as a target, and "definitions" with an escaped pointer segment */
    expect_language("{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#\"},\"n\":{\"$ref\":\"#/"
                    "definitions/a~1b\"}},"
                    "\"definitions\":{\"a/b\":{\"type\":\"integer\"}}}",
                    L("{}", "{\"next\":{\"next\":{\"n\":3}},\"n\":1}"), L("{\"next\":{\"n\":\"x\"}}"));
}

static void test_enum_and_const_match_their_values_exactly(void) {
    expect_language("{\"enum\":[\"red\",\"green\",7,null,true,{\"k\":[1,2]},\"h\\u00e9\",\"\\u65e5\\\"\"]}",
                    L("\"red\"", "\"green\" ", "7", "null", "true", "{\"k\":[1,2]}", "\"h\xc3\xa9\"",
                      "\"\xe6\x97\xa5\\\"\""),
                    L("\"blue\"", "\"Red\"", "8", "false", "\"7\"", "{\"k\":[1]}", "\"red", "red"));
    expect_language("{\"const\":\"on\"}", L("\"on\""), L("\"off\"", "\"on\"\"on\""));
    /* 'type' beside 'enum' keeps only the values of that type */
    expect_language("{\"type\":\"string\",\"enum\":[\"a\",1]}", L("\"a\""), L("1"));
    expect_language("{\"type\":\"integer\",\"enum\":[1.5,2]}", L("2"), L("1.5"));
}

static void test_item_counts_follow_min_and_max_items(void) {
    expect_language("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}",
                    L("[1,2]", "[1,2,3]", "[ 1 , 2 , 3 ]"),
                    L("[]", "[1]", "[1,2,3,4]", "[1,\"2\"]", "[1,2,]", "[,1,2]"));
    expect_language("{\"type\":\"array\",\"minItems\":1}", L("[1]", "[\"x\",{}]"), L("[]"));
    expect_language("{\"type\":\"array\",\"maxItems\":0}", L("[]"), L("[1]"));
    expect_language("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],"
                    "\"items\":{\"type\":\"null\"}}",
                    L("[]", "[\"a\"]", "[\"a\",1]", "[\"a\",1,null,null]"),
                    L("[1]", "[\"a\",\"b\"]", "[\"a\",1,2]", "[\"a\",,1]"));
    expect_language("{\"prefixItems\":[{\"type\":\"string\"}],\"minItems\":2}",
                    L("[\"a\",1]", "[\"a\",{},[]]"), L("[\"a\"]", "[1,1]"));
    expect_language(
        "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"items\":false}",
        L("[]", "[\"a\"]", "[\"a\",1]"), L("[\"a\",1,2]"));
    expect_language("{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"uniqueItems\":false}",
                    L("[]", "[true,true]"), L("[1]"));
}

static void test_string_length_follows_min_and_max_length(void) {
    expect_language("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
                    L("\"ab\"", "\"abc\"", "\"a\\n\"", "\"\xc3\xa9\xc3\xa9\""),
                    L("\"a\"", "\"abcd\"", "\"\"", "ab"));
    expect_language("{\"type\":\"string\",\"maxLength\":0}", L("\"\""), L("\"a\""));
}

static void test_keys_with_quotes_backslashes_and_unicode_are_written_as_json(void) {
    expect_language(
        "{\"properties\":{\"a\\\"b\":{\"type\":\"integer\"},\"c\\\\d\":{\"type\":\"integer\"},"
        "\"\\u00fc\":{\"type\":\"integer\"},\"t\\tx\":{\"type\":\"integer\"}},\"required\":[\"a\\\"b\","
        "\"c\\\\d\"]}",
        L("{\"a\\\"b\":1,\"c\\\\d\":2}", "{\"a\\\"b\":1,\"c\\\\d\":2,\"\xc3\xbc\":3,\"t\\tx\":4}"),
        L("{\"a\"b\":1,\"c\\\\d\":2}", "{\"a\\\"b\":1,\"c\\d\":2}",
          "{\"a\\\"b\":1,\"c\\\\d\":2,\"t\tx\":4}"));
}

static void test_additional_properties_cannot_stand_in_for_declared_ones(void) {
    expect_language(
        "{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"integer\"}},\"additionalProperties\":true}",
        L("{}", "{\"ab\":1}", "{\"ab\":1,\"x\":\"y\"}", "{\"a\":\"s\"}", "{\"abc\":[]}", "{\"\":1,\"b\":2}"),
        L("{\"ab\":\"s\"}", "{\"ab\":1,\"ab\":2}", "{\"x\":1,\"ab\":\"s\"}"));
    expect_language("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],"
                    "\"additionalProperties\":{\"type\":\"string\"}}",
                    L("{\"a\":1}", "{\"a\":1,\"b\":\"x\",\"c\":\"y\"}"),
                    L("{\"a\":1,\"b\":2}", "{\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\",}"));
    expect_language("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
                    L("{}", "{\"x\":1,\"y\":2}"), L("{\"x\":\"1\"}", "{\"x\":1,}"));
    expect_language("{\"type\":\"object\",\"additionalProperties\":false}", L("{}", "{ }"), L("{\"x\":1}"));
    expect_language("{\"type\":\"object\"}", L("{}", "{\"x\":[1,{\"y\":null}]}"), L("[]", "{\"x\"}"));
}

static void test_type_lists_and_any_of_are_alternations(void) {
    expect_language("{\"type\":[\"string\",\"null\"]}", L("\"x\"", "null"), L("1", "true"));
    expect_language("{\"type\":\"integer\"}", L("0", "-12", "7 "), L("1.5", "1e3", "\"1\"", "-", "01"));
    expect_language("{\"type\":\"number\"}", L("0", "-1.25", "1e3", "2.5E-7"), L(".5", "1.", "+1", "NaN"));
    expect_language(
        "{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"object\",\"properties\":{\"k\":{\"const\":1}},"
        "\"required\":[\"k\"]}],\"title\":\"either\"}",
        L("5", "{\"k\":1}"), L("\"5\"", "{}", "{\"k\":2}"));
    expect_language("{\"oneOf\":[{\"type\":\"boolean\"},{\"type\":\"null\"}]}", L("true", "null"), L("0"));
    expect_language("{\"allOf\":[{\"type\":\"boolean\"}]}", L("false"), L("null"));
}

static void test_true_and_empty_schemas_accept_any_json_value(void) {
    const char *any[] = {
        "true", "{}",
        "{\"title\":\"t\",\"description\":\"d\",\"$schema\":\"x\",\"default\":1,\"examples\":[1],"
        "\"$comment\":\"c\",\"deprecated\":false,\"readOnly\":true,\"writeOnly\":false,\"$id\":\"i\"}"};
    for (size_t i = 0; i < MF_ARRAY_LEN(any); i++)
        expect_language(any[i],
                        L("1", "\"s\"", "null", "[1,[2,{}]]", "{\"a\":{\"b\":[true,false]}}", "-0.5e10"),
                        L("", "nul", "[1,]", "{\"a\"}", "'s'"));
}

static void test_depth_up_to_the_limit_works_and_beyond_it_is_refused(void) {
    char deep[4096];
    for (int levels = 60; levels <= 100; levels += 40) {
        size_t n = 0;
        for (int i = 0; i < levels - 1; i++)
            n += (size_t)snprintf(deep + n, sizeof deep - n, "{\"type\":\"array\",\"items\":");
        n += (size_t)snprintf(deep + n, sizeof deep - n, "{\"type\":\"null\"}");
        for (int i = 0; i < levels - 1; i++) deep[n++] = '}';
        deep[n] = 0;
        char *out = NULL;
        mf_error e = {0};
        int rc = mf_json_schema_to_gbnf(deep, n, &out, &e);
        if (levels == 60) {
            CHECK(rc == 0, "%d levels: rc %d %s", levels, rc, e.msg);
            mf_grammar *g = NULL;
            CHECK(out && !mf_grammar_compile(out, strlen(out), &g, &e), "%d levels: %s", levels, e.msg);
            mf_grammar_release(g);
        } else {
            CHECK(rc == MF_E_UNSUPPORTED && !out, "%d levels: rc %d", levels, rc);
            CHECK(strstr(e.msg, "deeper than 64"), "message: %s", e.msg);
        }
        free(out);
    }
}

static void test_each_refusal_has_its_code_and_names_the_keyword_and_path(void) {
    static const struct {
        const char *schema;
        int code;
        const char *want1, *want2;
    } cases[] = {
        {"{\"properties\":{\"zip\":{\"type\":\"string\",\"pattern\":\"^[0-9]{5}$\"}}}", MF_E_UNSUPPORTED,
         "'pattern'", "#/properties/zip"},
        {"{\"properties\":{\"age\":{\"type\":\"integer\",\"minimum\":0}}}", MF_E_UNSUPPORTED, "'minimum'",
         "#/properties/age"},
        {"{\"type\":\"number\",\"maximum\":1}", MF_E_UNSUPPORTED, "'maximum'", " at #"},
        {"{\"type\":\"number\",\"exclusiveMinimum\":1}", MF_E_UNSUPPORTED, "'exclusiveMinimum'", " at #"},
        {"{\"type\":\"number\",\"exclusiveMaximum\":1}", MF_E_UNSUPPORTED, "'exclusiveMaximum'", " at #"},
        {"{\"type\":\"number\",\"multipleOf\":2}", MF_E_UNSUPPORTED, "'multipleOf'", " at #"},
        {"{\"type\":\"string\",\"format\":\"date\"}", MF_E_UNSUPPORTED, "'format'",
         "remove it or use a grammar"},
        {"{\"items\":{\"patternProperties\":{}}}", MF_E_UNSUPPORTED, "'patternProperties'", "#/items"},
        {"{\"propertyNames\":{}}", MF_E_UNSUPPORTED, "'propertyNames'", " at #"},
        {"{\"dependentRequired\":{}}", MF_E_UNSUPPORTED, "'dependentRequired'", " at #"},
        {"{\"if\":{},\"then\":{}}", MF_E_UNSUPPORTED, "'if'", " at #"},
        {"{\"not\":{}}", MF_E_UNSUPPORTED, "'not'", " at #"},
        {"{\"contains\":{}}", MF_E_UNSUPPORTED, "'contains'", " at #"},
        {"{\"uniqueItems\":true}", MF_E_UNSUPPORTED, "'uniqueItems'", " at #"},
        {"{\"minProperties\":1}", MF_E_UNSUPPORTED, "'minProperties'", " at #"},
        {"{\"maxProperties\":1}", MF_E_UNSUPPORTED, "'maxProperties'", " at #"},
        {"{\"unevaluatedProperties\":false}", MF_E_UNSUPPORTED, "'unevaluatedProperties'", " at #"},
        {"false", MF_E_UNSUPPORTED, "false", " at #"},
        {"{\"properties\":{\"x\":false}}", MF_E_UNSUPPORTED, "false", "#/properties/x"},
        {"{\"allOf\":[{},{}]}", MF_E_UNSUPPORTED, "'allOf'", " at #"},
        {"{\"anyOf\":[{}],\"type\":\"object\"}", MF_E_UNSUPPORTED, "'anyOf' and 'type'", " at #"},
        {"{\"oneOf\":[{}],\"properties\":{}}", MF_E_UNSUPPORTED, "'oneOf' and 'properties'", " at #"},
        {"{\"$ref\":\"#\",\"minItems\":1}", MF_E_UNSUPPORTED, "'$ref' and 'minItems'", " at #"},
        {"{\"enum\":[\"a\"],\"minLength\":1}", MF_E_UNSUPPORTED, "'minLength'", " at #"},
        {"{\"properties\":{\"a\":{}},\"required\":[\"a\",\"b\"]}", MF_E_UNSUPPORTED, "'b'", "'required'"},
        {"{\"minItems\":3,\"maxItems\":2}", MF_E_INVAL, "'maxItems'", " at #"},
        {"{\"properties\":{\"l\":{\"minItems\":1001}}}", MF_E_UNSUPPORTED, "'minItems'", "#/properties/l"},
        {"{\"maxItems\":5000}", MF_E_UNSUPPORTED, "'maxItems'", " at #"},
        {"{\"type\":\"string\",\"maxLength\":1001}", MF_E_UNSUPPORTED, "'maxLength'", " at #"},
        {"{\"minItems\":-1}", MF_E_INVAL, "'minItems'", "non-negative integer"},
        {"{\"minLength\":1.5}", MF_E_INVAL, "'minLength'", "non-negative integer"},
        {"{\"type\":\"strnig\"}", MF_E_INVAL, "'strnig'", " at #"},
        {"{\"properties\":{\"a\":{\"type\":[\"string\",\"bogus\"]}}}", MF_E_INVAL, "'bogus'",
         "#/properties/a"},
        {"{\"$ref\":\"https://example.com/s.json\"}", MF_E_UNSUPPORTED, "https://example.com/s.json",
         "'$ref'"},
        {"{\"$ref\":\"#/$defs/missing\"}", MF_E_INVAL, "#/$defs/missing", "'$ref'"},
        {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"anyOf\":[{\"$ref\":\"#/$defs/"
         "a\"}]}},\"$ref\":\"#/$defs/a\"}",
         MF_E_UNSUPPORTED, "left recursion", "#/$defs/"},
        {"{\"enum\":\"a\"}", MF_E_INVAL, "'enum'", " at #"},
        {"{\"enum\":[]}", MF_E_UNSUPPORTED, "'enum'", " at #"},
        {"{\"type\":\"string\",\"const\":1}", MF_E_UNSUPPORTED, "'const'", " at #"},
        {"{\"items\":[{}]}", MF_E_UNSUPPORTED, "'items'", "prefixItems"},
        {"{\"properties\":{\"a\":3}}", MF_E_INVAL, "#/properties/a", "not an object or a boolean"},
        {"[{}]", MF_E_INVAL, " at #", "not an object or a boolean"},
        {"{\"type\":\"object\",\"type\":\"string\"}", MF_E_INVAL, "'type'", "twice"},
        {"{\"properties\":{\"a\":{},\"a\":{}}}", MF_E_INVAL, "'a'", "twice"},
        {"{\"enum\":[1e400]}", MF_E_UNSUPPORTED, "'enum'", " at #"},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(cases); i++) {
        char *out = (char *)"untouched";
        mf_error e = {0};
        int rc = mf_json_schema_to_gbnf(cases[i].schema, strlen(cases[i].schema), &out, &e);
        CHECK(rc == cases[i].code, "%s: rc %d, want %d (%s)", cases[i].schema, rc, cases[i].code, e.msg);
        CHECK(out == NULL, "%s: *out not NULL on failure", cases[i].schema);
        CHECK(e.code == rc, "%s: err.code %d", cases[i].schema, e.code);
        CHECK(strstr(e.msg, cases[i].want1) && strstr(e.msg, cases[i].want2),
              "%s: message '%s' lacks '%s' or '%s'", cases[i].schema, e.msg, cases[i].want1, cases[i].want2);
        if (!rc) free(out);
    }
}

static void test_input_that_is_not_one_json_value_is_invalid(void) {
    static const struct {
        const char *text;
        size_t len;
        const char *want;
    } cases[] = {
        {NULL, 0, "empty"},
        {"{}", 0, "empty"},
        {"{\"type\": }", 10, "not valid JSON near byte"},
        {"{\"type\":\"string\"} {}", 20, "more text after"},
        {"{\"a\":1}\0", 8, "NUL"},
        {"7", 1, "not an object or a boolean"},
        {"\"string\"", 8, "not an object or a boolean"},
        {"null", 4, "not an object or a boolean"},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(cases); i++) {
        char *out = NULL;
        mf_error e = {0};
        int rc = mf_json_schema_to_gbnf(cases[i].text, cases[i].len, &out, &e);
        CHECK(rc == MF_E_INVAL && !out, "case %zu: rc %d", i, rc);
        CHECK(strstr(e.msg, cases[i].want), "case %zu: message '%s' lacks '%s'", i, e.msg, cases[i].want);
    }
    /* only the given bytes count: a schema cut short is refused, the same bytes with their length work */
    const char *s = "{\"type\":\"null\"}garbage";
    char *out = NULL;
    CHECK(mf_json_schema_to_gbnf(s, 15, &out, NULL) == 0 && out, "a length-bounded schema failed");
    free(out);
    out = NULL;
    CHECK(mf_json_schema_to_gbnf(s, 10, &out, NULL) == MF_E_INVAL && !out, "a cut schema was taken");
    CHECK(mf_json_schema_to_gbnf("{}", 2, NULL, NULL) == MF_E_INVAL, "a NULL out was taken");
}

/* Many properties, wide enums and long keys stay linear-sized and compile (no quadratic text). */
static void test_large_schemas_give_grammars_that_compile(void) {
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    REQUIRE(s, "out of memory");
    n += (size_t)snprintf(s + n, cap - n,
                          "{\"type\":\"object\",\"additionalProperties\":true,\"properties\":{");
    for (int i = 0; i < 300; i++)
        n += (size_t)snprintf(s + n, cap - n, "%s\"key%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    n += (size_t)snprintf(s + n, cap - n, "}}");
    char *out = NULL;
    mf_error e = {0};
    int rc = mf_json_schema_to_gbnf(s, n, &out, &e);
    CHECK(rc == 0, "rc %d: %s", rc, e.msg);
    CHECK(out && strlen(out) < 200000, "grammar of %zu bytes", out ? strlen(out) : 0);
    mf_grammar *g = NULL;
    if (out) CHECK(!mf_grammar_compile(out, strlen(out), &g, &e), "compile: %s", e.msg);
    if (g) {
        CHECK(matches(g, "{\"key299\":1,\"keyx\":\"x\"}"),
              "last declared key then an extra one should match");
        CHECK(!matches(g, "{\"key299\":1,\"key1\":\"x\"}"),
              "a declared key as an extra one should not match");
    }
    mf_grammar_release(g);
    free(out);
    free(s);
}

int main(void) {
    RUN(test_required_properties_must_appear_and_undeclared_ones_must_not);
    RUN(test_optional_properties_keep_commas_right_in_every_subset);
    RUN(test_whitespace_between_tokens_is_bounded);
    RUN(test_recursive_ref_builds_trees_of_any_depth);
    RUN(test_enum_and_const_match_their_values_exactly);
    RUN(test_item_counts_follow_min_and_max_items);
    RUN(test_string_length_follows_min_and_max_length);
    RUN(test_keys_with_quotes_backslashes_and_unicode_are_written_as_json);
    RUN(test_additional_properties_cannot_stand_in_for_declared_ones);
    RUN(test_type_lists_and_any_of_are_alternations);
    RUN(test_true_and_empty_schemas_accept_any_json_value);
    RUN(test_depth_up_to_the_limit_works_and_beyond_it_is_refused);
    RUN(test_each_refusal_has_its_code_and_names_the_keyword_and_path);
    RUN(test_input_that_is_not_one_json_value_is_invalid);
    RUN(test_large_schemas_give_grammars_that_compile);
    return mf_test_done();
}
