/* Members of a JSON object being built (see json.h). */
#include "topology/base/json.h"

#include "topology/base/cpulist.h"

void
qp_json_add_int(JsonBuilder *b, const char *key, gint64 v)
{
  json_builder_set_member_name(b, key);
  json_builder_add_int_value(b, v);
}

void
qp_json_add_string_value(JsonBuilder *b, const char *v)
{
  /* JSON is UTF-8: a text that is not (a file name of the caller's in a
   * device's words or a warning) gets U+FFFD for each bad byte, as a
   * record's text does (jvalue.c), so that the document stays JSON. */
  if (g_utf8_validate(v, -1, NULL)) {
    json_builder_add_string_value(b, v);
    return;
  }
  g_autofree char *valid = g_utf8_make_valid(v, -1);
  json_builder_add_string_value(b, valid);
}

void
qp_json_add_string(JsonBuilder *b, const char *key, const char *v)
{
  json_builder_set_member_name(b, key);
  if (v != NULL)
    qp_json_add_string_value(b, v);
  else
    json_builder_add_null_value(b);
}

void
qp_json_add_list(JsonBuilder *b, const char *key, hwloc_const_bitmap_t set)
{
  g_autofree char *s = qp_list_format(set);
  qp_json_add_string(b, key, s);
}

void
qp_json_add_list_or_null(JsonBuilder *b, const char *key,
                         hwloc_const_bitmap_t set)
{
  if (set == NULL)
    qp_json_add_string(b, key, NULL);
  else
    qp_json_add_list(b, key, set);
}

void
qp_json_add_strings(JsonBuilder *b, const char *key, const GPtrArray *lines)
{
  json_builder_set_member_name(b, key);
  json_builder_begin_array(b);
  for (guint i = 0; lines != NULL && i < lines->len; i++)
    qp_json_add_string_value(b, g_ptr_array_index(lines, i));
  json_builder_end_array(b);
}

void
qp_json_add_node_member(JsonBuilder *b, int node, gint64 v)
{
  char key[16];
  g_snprintf(key, sizeof key, "%d", node);
  qp_json_add_int(b, key, v);
}

void
qp_json_add_jv(JsonBuilder *b, const QpJv *v)
{
  switch (qp_jv_type(v)) {
  case QP_JV_NULL:
    json_builder_add_null_value(b);
    return;
  case QP_JV_BOOL:
    json_builder_add_boolean_value(b, qp_jv_get_bool(v));
    return;
  case QP_JV_INT:
    json_builder_add_int_value(b, qp_jv_get_int(v));
    return;
  case QP_JV_DOUBLE:
    json_builder_add_double_value(b, qp_jv_get_double(v));
    return;
  case QP_JV_STRING:
    qp_json_add_string_value(b, qp_jv_get_string(v));
    return;
  case QP_JV_ARRAY:
    json_builder_begin_array(b);
    for (guint i = 0; i < qp_jv_len(v); i++)
      qp_json_add_jv(b, qp_jv_item(v, i));
    json_builder_end_array(b);
    return;
  case QP_JV_OBJECT:
    json_builder_begin_object(b);
    qp_json_add_jv_members(b, v);
    json_builder_end_object(b);
    return;
  }
}

void
qp_json_add_jv_members(JsonBuilder *b, const QpJv *object)
{
  for (guint i = 0; i < qp_jv_len(object); i++) {
    json_builder_set_member_name(b, qp_jv_key(object, i));
    qp_json_add_jv(b, qp_jv_value(object, i));
  }
}
