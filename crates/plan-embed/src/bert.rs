//! A BERT encoder's forward pass, on the CPU in `f32`: embeddings, then each layer's
//! self-attention and feed-forward, each followed by a residual sum and a layer norm.

use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use crate::LoadError;

/// `config.json`'s fields the forward pass reads.
#[derive(Deserialize)]
pub(crate) struct Config {
    #[serde(default)]
    model_type: Option<String>,
    pub(crate) hidden_size: usize,
    pub(crate) vocab_size: u32,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    intermediate_size: usize,
    pub(crate) max_position_embeddings: usize,
    #[serde(default = "eps")]
    layer_norm_eps: f32,
    #[serde(default = "gelu")]
    hidden_act: String,
}

fn eps() -> f32 {
    1e-12
}

fn gelu() -> String {
    "gelu".to_owned()
}

struct Linear {
    /// `[out, in]`, as PyTorch keeps it.
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

pub(crate) struct Bert {
    hidden: usize,
    heads: usize,
    eps: f32,
    tanh_gelu: bool,
    words: Vec<f32>,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    embeddings_norm: Norm,
    layers: Vec<Layer>,
}

/// The tensors of one file, found with or without the prefix some checkpoints add.
struct Tensors<'a> {
    file: SafeTensors<'a>,
    prefix: &'static str,
}

impl Tensors<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LoadError> {
        let full = format!("{}{name}", self.prefix);
        let t = (self.file.tensor(&full)).map_err(|_| LoadError::Missing(full.clone()))?;
        if t.shape() != shape {
            return Err(LoadError::Shape {
                name: full,
                found: t.shape().to_vec(),
                wanted: shape.to_vec(),
            });
        }
        let data = t.data();
        let floats: Vec<f32> = match t.dtype() {
            Dtype::F32 => data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::F16 => data
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::BF16 => data
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => return Err(LoadError::Dtype(full, format!("{other:?}"))),
        };
        Ok(floats)
    }

    fn linear(&self, name: &str, inputs: usize, outputs: usize) -> Result<Linear, LoadError> {
        Ok(Linear {
            weight: self.get(&format!("{name}.weight"), &[outputs, inputs])?,
            bias: self.get(&format!("{name}.bias"), &[outputs])?,
            inputs,
            outputs,
        })
    }

    fn norm(&self, name: &str, size: usize) -> Result<Norm, LoadError> {
        Ok(Norm {
            weight: self.get(&format!("{name}.weight"), &[size])?,
            bias: self.get(&format!("{name}.bias"), &[size])?,
        })
    }
}

impl Bert {
    pub(crate) fn load(config: &Config, weights: &[u8]) -> Result<Bert, LoadError> {
        if config.model_type.as_deref().is_some_and(|m| m != "bert") {
            let kind = config.model_type.clone().unwrap_or_default();
            return Err(LoadError::Config(format!("a `{kind}` model, not BERT")));
        }
        let tanh_gelu = match config.hidden_act.as_str() {
            "gelu" => false,
            "gelu_new" | "gelu_pytorch_tanh" => true,
            other => return Err(LoadError::Config(format!("activation `{other}`"))),
        };
        let (h, heads) = (config.hidden_size, config.num_attention_heads);
        if h == 0 || heads == 0 || h % heads != 0 {
            return Err(LoadError::Config(format!(
                "{h} hidden units in {heads} attention heads"
            )));
        }
        // NB: a text is `[CLS]`, at least one piece, `[SEP]`.
        if config.max_position_embeddings < 3 {
            return Err(LoadError::Config(format!(
                "{} positions: a text needs 3 at least",
                config.max_position_embeddings
            )));
        }
        let file =
            SafeTensors::deserialize(weights).map_err(|e| LoadError::Weights(e.to_string()))?;
        let prefix = match file.names().iter().any(|n| n.starts_with("bert.")) {
            true => "bert.",
            false => "",
        };
        let t = Tensors { file, prefix };
        let vocab = config.vocab_size as usize;
        let words = t.get("embeddings.word_embeddings.weight", &[vocab, h])?;
        let positions = t.get(
            "embeddings.position_embeddings.weight",
            &[config.max_position_embeddings, h],
        )?;
        let types = t
            .file
            .tensor(&format!("{prefix}embeddings.token_type_embeddings.weight"));
        let types = types
            .map(|t| t.shape().first().copied().unwrap_or(0))
            .unwrap_or(0);
        let token_type = t.get(
            "embeddings.token_type_embeddings.weight",
            &[types.max(1), h],
        )?;
        let layers = (0..config.num_hidden_layers)
            .map(|l| {
                let p = format!("encoder.layer.{l}");
                let i = config.intermediate_size;
                Ok(Layer {
                    query: t.linear(&format!("{p}.attention.self.query"), h, h)?,
                    key: t.linear(&format!("{p}.attention.self.key"), h, h)?,
                    value: t.linear(&format!("{p}.attention.self.value"), h, h)?,
                    attention_out: t.linear(&format!("{p}.attention.output.dense"), h, h)?,
                    attention_norm: t.norm(&format!("{p}.attention.output.LayerNorm"), h)?,
                    intermediate: t.linear(&format!("{p}.intermediate.dense"), h, i)?,
                    output: t.linear(&format!("{p}.output.dense"), i, h)?,
                    output_norm: t.norm(&format!("{p}.output.LayerNorm"), h)?,
                })
            })
            .collect::<Result<_, LoadError>>()?;
        Ok(Bert {
            hidden: h,
            heads,
            eps: config.layer_norm_eps,
            tanh_gelu,
            embeddings_norm: t.norm("embeddings.LayerNorm", h)?,
            words,
            positions,
            token_type,
            layers,
        })
    }

    /// The last layer's states of `ids` (at most `max_position_embeddings` of them, each
    /// below the vocabulary's size), `ids.len()` rows of `hidden`.
    pub(crate) fn states(&self, ids: &[u32]) -> Vec<f32> {
        let (n, h) = (ids.len(), self.hidden);
        let mut x = vec![0f32; n * h];
        for (i, &id) in ids.iter().enumerate() {
            let row = &mut x[i * h..(i + 1) * h];
            let word = &self.words[id as usize * h..][..h];
            let place = &self.positions[i * h..][..h];
            for (j, r) in row.iter_mut().enumerate() {
                *r = word[j] + place[j] + self.token_type[j];
            }
        }
        self.normalize(&mut x, &self.embeddings_norm);
        for layer in &self.layers {
            let attended = self.attention(layer, &x, n);
            let mut y = layer.attention_out.apply(&attended, n);
            add(&mut y, &x);
            self.normalize(&mut y, &layer.attention_norm);
            let mut inner = layer.intermediate.apply(&y, n);
            for v in &mut inner {
                *v = match self.tanh_gelu {
                    true => gelu_tanh(*v),
                    false => gelu_erf(*v),
                };
            }
            let mut out = layer.output.apply(&inner, n);
            add(&mut out, &y);
            self.normalize(&mut out, &layer.output_norm);
            x = out;
        }
        x
    }

    /// Each head's attention over every token (one sequence, no padding), the heads'
    /// results side by side.
    fn attention(&self, layer: &Layer, x: &[f32], n: usize) -> Vec<f32> {
        let h = self.hidden;
        let d = h / self.heads;
        let q = layer.query.apply(x, n);
        let k = layer.key.apply(x, n);
        let v = layer.value.apply(x, n);
        let scale = 1.0 / (d as f32).sqrt();
        let mut out = vec![0f32; n * h];
        let mut weights = vec![0f32; n * n];
        for head in 0..self.heads {
            let at = head * d;
            // weights = q_h · k_hᵀ (n × n), then a softmax per row.
            product(
                Operand::rows(&q[at..], n, d, h),
                Operand::columns(&k[at..], d, n, h),
                &mut weights,
                n,
                0.0,
            );
            for row in weights.chunks_exact_mut(n) {
                let top = row.iter().fold(f32::NEG_INFINITY, |m, &w| m.max(w * scale));
                let mut sum = 0.0;
                for w in row.iter_mut() {
                    *w = (*w * scale - top).exp();
                    sum += *w;
                }
                row.iter_mut().for_each(|w| *w /= sum);
            }
            // out_h = weights · v_h (n × d), into the head's columns.
            product(
                Operand::rows(&weights, n, n, n),
                Operand::rows(&v[at..], n, d, h),
                &mut out[at..],
                h,
                0.0,
            );
        }
        out
    }

    fn normalize(&self, x: &mut [f32], norm: &Norm) {
        for row in x.chunks_exact_mut(self.hidden) {
            let mean = row.iter().sum::<f32>() / row.len() as f32;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / row.len() as f32;
            let scale = 1.0 / (var + self.eps).sqrt();
            for (j, v) in row.iter_mut().enumerate() {
                *v = (*v - mean) * scale * norm.weight[j] + norm.bias[j];
            }
        }
    }
}

impl Linear {
    /// `x · weightᵀ + bias` for `n` rows of `x`.
    fn apply(&self, x: &[f32], n: usize) -> Vec<f32> {
        let mut y: Vec<f32> = (0..n).flat_map(|_| self.bias.iter().copied()).collect();
        product(
            Operand::rows(x, n, self.inputs, self.inputs),
            Operand::columns(&self.weight, self.inputs, self.outputs, self.inputs),
            &mut y,
            self.outputs,
            1.0,
        );
        y
    }
}

fn add(y: &mut [f32], x: &[f32]) {
    y.iter_mut().zip(x).for_each(|(a, b)| *a += b);
}

fn gelu_tanh(x: f32) -> f32 {
    0.5 * x * (1.0 + (0.797_884_6 * (x + 0.044_715 * x * x * x)).tanh())
}

/// GELU by the error function, as BERT's `gelu` is.
fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2))
}

/// The error function to within 1.5e-7 (Abramowitz and Stegun, 7.1.26).
fn erf(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    let y = 1.0 - poly * (-x * x).exp();
    if x < 0.0 { -y } else { y }
}

/// A matrix of `rows × cols` read from a slice with a row stride: as laid out, or (by
/// `columns`) the transpose of the one laid out.
struct Operand<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl<'a> Operand<'a> {
    fn rows(data: &'a [f32], rows: usize, cols: usize, stride: usize) -> Operand<'a> {
        Operand {
            data,
            rows,
            cols,
            row_stride: stride,
            col_stride: 1,
        }
    }

    /// The `rows × cols` matrix whose columns are the rows of `data` (stride `stride`).
    fn columns(data: &'a [f32], rows: usize, cols: usize, stride: usize) -> Operand<'a> {
        Operand {
            data,
            rows,
            cols,
            row_stride: 1,
            col_stride: stride,
        }
    }

    /// The index one past the last element read.
    fn extent(&self) -> usize {
        match self.rows == 0 || self.cols == 0 {
            true => 0,
            false => (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride + 1,
        }
    }
}

/// `c = a · b + beta · c`, `c` with row stride `c_stride`.
fn product(a: Operand<'_>, b: Operand<'_>, c: &mut [f32], c_stride: usize, beta: f32) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(k, b.rows, "the inner dimensions differ");
    assert!(a.extent() <= a.data.len() && b.extent() <= b.data.len());
    assert!(m == 0 || n == 0 || (m - 1) * c_stride + n <= c.len());
    assert!(n <= c_stride);
    // SAFETY: the asserts above keep every element sgemm reads within `a` and `b` and
    // every one it writes within `c`; the slices do not overlap (`c` is borrowed
    // mutably).
    #[allow(unsafe_code)]
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.data.as_ptr(),
            a.row_stride as isize,
            a.col_stride as isize,
            b.data.as_ptr(),
            b.row_stride as isize,
            b.col_stride as isize,
            beta,
            c.as_mut_ptr(),
            c_stride as isize,
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_match_the_definition() {
        // a: 2×3, b = wᵀ with w: 2×3 (so b: 3×2).
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let w = [1.0, 0.0, -1.0, 2.0, 1.0, 0.5];
        let mut c = vec![10.0; 4];
        product(
            Operand::rows(&a, 2, 3, 3),
            Operand::columns(&w, 3, 2, 3),
            &mut c,
            2,
            1.0,
        );
        assert_eq!(c, [10.0 - 2.0, 10.0 + 5.5, 10.0 - 2.0, 10.0 + 16.0]);
    }

    #[test]
    fn erf_is_close() {
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (-2.0, -0.995_322_3),
        ] {
            assert!((erf(x) - want).abs() < 1e-6, "erf({x}) = {}", erf(x));
        }
    }
}
