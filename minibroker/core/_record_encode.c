/* The records of a v2 batch's body, encoded in C: the same bytes as encode_records_py in
 * minibroker/core/records.py (the reference, which the tests compare this with on random
 * records). The producer encodes every record it sends, so this must cost nanoseconds per
 * record, not the ~1 us the Python loop costs.
 *
 * encode_records(records, base_timestamp) -> (body, max_timestamp)
 *
 * `records` is a list or tuple of (key, value, headers, timestamp): key and value are bytes-like
 * or None, headers a sequence of (str, bytes-like or None), timestamp an int or None (the base
 * timestamp). Record i gets offset delta i. Two passes: the first sizes every record, the
 * second writes them into one bytes object allocated once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Bytes of the zigzag varint (or varlong) of v. */
static Py_ssize_t varint_size(int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static uint8_t *write_varint(uint8_t *out, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z >= 0x80) {
        *out++ = (uint8_t)((z & 0x7f) | 0x80);
        z >>= 7;
    }
    *out++ = (uint8_t)z;
    return out;
}

/* A nullable bytes field: its view (len -1 for None). 0 on success, -1 with an exception. */
static int get_field(PyObject *obj, Py_buffer *view, const char *what)
{
    if (obj == Py_None) {
        view->obj = NULL;
        view->buf = NULL;
        view->len = -1;
        return 0;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) {
        PyErr_Format(PyExc_TypeError, "a record's %s must be bytes or None, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

static void release_field(Py_buffer *view)
{
    if (view->obj != NULL)
        PyBuffer_Release(view);
}

static Py_ssize_t field_size(const Py_buffer *view)
{
    return view->len < 0 ? 1 : varint_size(view->len) + view->len;
}

static uint8_t *write_field(uint8_t *out, const Py_buffer *view)
{
    if (view->len < 0)
        return write_varint(out, -1);
    out = write_varint(out, view->len);
    memcpy(out, view->buf, (size_t)view->len);
    return out + view->len;
}

/* One record: its fields unpacked and checked, with borrowed references into the tuple. */
typedef struct {
    Py_buffer key, value;
    PyObject *headers; /* a sequence, from PySequence_Fast (a new reference) */
    int64_t timestamp_delta;
} Fields;

static int unpack(PyObject *record, int64_t base_timestamp, int64_t *max_timestamp,
                  Fields *f)
{
    if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != 4) {
        PyErr_SetString(PyExc_TypeError, "a record is a tuple (key, value, headers, timestamp)");
        return -1;
    }
    PyObject *ts = PyTuple_GET_ITEM(record, 3);
    int64_t timestamp = base_timestamp;
    if (ts != Py_None) {
        timestamp = PyLong_AsLongLong(ts);
        if (timestamp == -1 && PyErr_Occurred())
            return -1;
    }
    if (timestamp > *max_timestamp)
        *max_timestamp = timestamp;
    /* Wrapping, as Kafka's long arithmetic would; sane timestamps never come near it. */
    f->timestamp_delta = (int64_t)((uint64_t)timestamp - (uint64_t)base_timestamp);
    if (get_field(PyTuple_GET_ITEM(record, 0), &f->key, "key"))
        return -1;
    if (get_field(PyTuple_GET_ITEM(record, 1), &f->value, "value")) {
        release_field(&f->key);
        return -1;
    }
    f->headers = PySequence_Fast(PyTuple_GET_ITEM(record, 2), "a record's headers must be a sequence");
    if (f->headers == NULL) {
        release_field(&f->key);
        release_field(&f->value);
        return -1;
    }
    return 0;
}

static void release(Fields *f)
{
    release_field(&f->key);
    release_field(&f->value);
    Py_XDECREF(f->headers);
}

/* The headers' encoded size, their count included; -1 with an exception. */
static Py_ssize_t headers_size(PyObject *headers)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(headers);
    Py_ssize_t size = varint_size(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *h = PySequence_Fast_GET_ITEM(headers, i);
        if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(h, 0))) {
            PyErr_SetString(PyExc_TypeError, "a header is a tuple (str, bytes or None)");
            return -1;
        }
        Py_ssize_t name_len;
        if (PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(h, 0), &name_len) == NULL)
            return -1;
        Py_buffer value;
        if (get_field(PyTuple_GET_ITEM(h, 1), &value, "header value"))
            return -1;
        size += varint_size(name_len) + name_len + field_size(&value);
        release_field(&value);
    }
    return size;
}

static uint8_t *write_headers(uint8_t *out, PyObject *headers)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(headers);
    out = write_varint(out, n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *h = PySequence_Fast_GET_ITEM(headers, i);
        Py_ssize_t name_len;
        const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(h, 0), &name_len);
        Py_buffer value;
        if (name == NULL || get_field(PyTuple_GET_ITEM(h, 1), &value, "header value"))
            return NULL;
        out = write_varint(out, name_len);
        memcpy(out, name, (size_t)name_len);
        out = write_field(out + name_len, &value);
        release_field(&value);
    }
    return out;
}

/* The size of a record without its length prefix; -1 with an exception. */
static Py_ssize_t record_size(const Fields *f, Py_ssize_t delta)
{
    Py_ssize_t h = headers_size(f->headers);
    if (h < 0)
        return -1;
    return 1 + varint_size(f->timestamp_delta) + varint_size(delta) + field_size(&f->key) +
           field_size(&f->value) + h;
}

static PyObject *encode_records(PyObject *self, PyObject *args)
{
    PyObject *records_arg;
    long long base_timestamp;
    if (!PyArg_ParseTuple(args, "OL", &records_arg, &base_timestamp))
        return NULL;
    PyObject *records = PySequence_Fast(records_arg, "records must be a sequence");
    if (records == NULL)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(records);
    int64_t max_timestamp = INT64_MIN;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Fields f;
        if (unpack(PySequence_Fast_GET_ITEM(records, i), base_timestamp, &max_timestamp, &f))
            goto fail;
        Py_ssize_t size = record_size(&f, i);
        release(&f);
        if (size < 0)
            goto fail;
        total += varint_size(size) + size;
    }
    PyObject *body = PyBytes_FromStringAndSize(NULL, total);
    if (body == NULL)
        goto fail;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(body);
    const uint8_t *end = out + total;
    int64_t ignored = INT64_MIN;
    for (Py_ssize_t i = 0; i < count; i++) {
        Fields f;
        if (unpack(PySequence_Fast_GET_ITEM(records, i), base_timestamp, &ignored, &f)) {
            Py_DECREF(body);
            goto fail;
        }
        Py_ssize_t size = record_size(&f, i);
        /* A record that grew since it was sized (a bytearray changed by an __index__ called
         * on a timestamp, say) must not write past the buffer. */
        if (size >= 0 && end - out < varint_size(size) + size) {
            PyErr_SetString(PyExc_RuntimeError, "a record changed while it was encoded");
            size = -1;
        }
        if (size >= 0) {
            out = write_varint(out, size);
            *out++ = 0; /* attributes: unused in v2 records */
            out = write_varint(out, f.timestamp_delta);
            out = write_varint(out, i);
            out = write_field(out, &f.key);
            out = write_field(out, &f.value);
            out = write_headers(out, f.headers);
        }
        release(&f);
        if (size < 0 || out == NULL) {
            Py_DECREF(body);
            goto fail;
        }
    }
    Py_DECREF(records);
    if (out != end) {
        Py_DECREF(body);
        PyErr_SetString(PyExc_RuntimeError, "a record changed while it was encoded");
        return NULL;
    }
    if (count == 0)
        max_timestamp = base_timestamp;
    return Py_BuildValue("(NL)", body, (long long)max_timestamp);
fail:
    Py_DECREF(records);
    return NULL;
}

static PyMethodDef methods[] = {
    {"encode_records", encode_records, METH_VARARGS,
     "encode_records(records, base_timestamp) -> (body, max_timestamp)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "minibroker.core._record_encode",
    "The records of a v2 batch body, encoded in C (see records.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__record_encode(void) { return PyModule_Create(&module); }
