//! JSON ⇄ Python, directly (no text in between): what crosses the boundary is a tool's
//! keyword arguments, its result, preset variables and a run's outcome.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// Deeper than any plan value may be (the VM refuses values past 100 levels); also what
/// stops a list that contains itself.
const MAX_DEPTH: usize = 256;

pub(crate) fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => dict(py, map)?.into_any(),
    })
}

pub(crate) fn dict<'py, 'a, K: AsRef<str>>(
    py: Python<'py>,
    map: impl IntoIterator<Item = (K, &'a Value)>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in map {
        d.set_item(k.as_ref(), to_py(py, v)?)?;
    }
    Ok(d)
}

/// A Python value as JSON: `None`, `bool`, `int` (64-bit), finite `float`, `str`, and
/// lists, tuples and dicts (with `str` keys) of those. Anything else is a `TypeError`
/// naming `what` and the path to the value.
pub(crate) fn from_py(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    let mut path = String::new();
    convert(obj, what, &mut path, 0)
}

fn convert(obj: &Bound<'_, PyAny>, what: &str, path: &mut String, depth: usize) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "{what}{path}: nested more than {MAX_DEPTH} levels deep (or contains itself)"
        )));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    // NB: before int: a bool is an int in Python.
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(PyValueError::new_err(format!(
            "{what}{path}: the integer {} does not fit in 64 bits",
            obj.str().map(|s| s.to_string()).unwrap_or_default()
        )));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let x = f.value();
        return Number::from_f64(x).map(Value::Number).ok_or_else(|| {
            PyValueError::new_err(format!("{what}{path}: {x} is not a JSON number"))
        });
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.extract::<String>()?));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!(
                    "{what}{path}: a dict key is {}, not str",
                    type_name(&k)
                )));
            };
            let key: String = key.extract()?;
            let len = path.len();
            path.push_str(&format!("[{key:?}]"));
            let value = convert(&v, what, path, depth + 1)?;
            path.truncate(len);
            map.insert(key, value);
        }
        return Ok(Value::Object(map));
    }
    let items: Option<Vec<Bound<'_, PyAny>>> = if let Ok(l) = obj.cast::<PyList>() {
        Some(l.iter().collect())
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        Some(t.iter().collect())
    } else {
        None
    };
    if let Some(items) = items {
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let len = path.len();
            path.push_str(&format!("[{i}]"));
            out.push(convert(item, what, path, depth + 1)?);
            path.truncate(len);
        }
        return Ok(Value::Array(out));
    }
    Err(PyTypeError::new_err(format!(
        "{what}{path}: {} is not JSON-compatible (use None, bool, int, float, str, list, tuple or dict)",
        type_name(obj)
    )))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "a value".to_owned())
}

/// An exception as a failed call's message: `KeyError: 'no such topic'`.
pub(crate) fn describe_exception(exc: &Bound<'_, PyAny>) -> String {
    let kind = exc
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let text = exc.str().map(|s| s.to_string()).unwrap_or_default();
    format!("{kind}: {text}")
}
