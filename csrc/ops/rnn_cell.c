/* The fused cells that nn.LSTM, nn.GRU, LSTMCell and GRUCell call on every
 * accelerator device, one time step each. PyTorch has done the gates'
 * matmuls: input_gates = x W_ih^T and hidden_gates = h W_hh^T, [batch,
 * gates * hidden], biases passed apart. Gate blocks are in PyTorch's order:
 * LSTM (i, f, g, o), GRU (r, z, n).
 *
 *   LSTM  i, f, o = sigmoid, g = tanh of ig + hg (+ biases)
 *         cy = f cx + i g,  hy = o tanh(cy)
 *   GRU   r, z = sigmoid of ig + hg (+ biases), hn = hg_n (+ b_hn)
 *         n = tanh(ig_n (+ b_in) + r hn),  hy = n + z (hx - n)
 *
 * The workspace the forward returns is what its backward reads: LSTM's the
 * activated gates (i, f, g, o), GRU's (r, z, n, hn, hx), as PyTorch's CUDA
 * kernels keep them. float16/bfloat16 compute in float32. */
#include "hlo/slice_ops.h"
#include "ops/families.h"

typedef struct cell {
  hlo_builder* b;
  tpu_dtype t;    /* compute dtype */
  int64_t hidden; /* one gate block's width */
} cell;

static hlo_value add(const cell* c, hlo_value x, hlo_value y) { return hlo_binary(c->b, "add", x, y); }
static hlo_value sub(const cell* c, hlo_value x, hlo_value y) { return hlo_binary(c->b, "subtract", x, y); }
static hlo_value mul(const cell* c, hlo_value x, hlo_value y) { return hlo_binary(c->b, "multiply", x, y); }
static hlo_value one_minus(const cell* c, hlo_value x) { return sub(c, hlo_constant_like(c->b, x, 1), x); }

/* The derivatives through an activation, from its output y. */
static hlo_value sigmoid_slope(const cell* c, hlo_value y) { return mul(c, y, one_minus(c, y)); }
static hlo_value tanh_slope(const cell* c, hlo_value y) { return one_minus(c, mul(c, y, y)); }

/* Gate block k of a [batch, blocks * hidden] value. */
static hlo_value block(const cell* c, hlo_value x, int k) {
  return hlo_slice_dim(c->b, x, 1, k * c->hidden, (k + 1) * c->hidden);
}

static hlo_value blocks(const cell* c, const hlo_value* parts, int count) {
  return hlo_concatenate(c->b, parts, count, 1);
}

/* A cell's context from the argument whose last dim is `count` blocks. */
static cell cell_of(tpu_lowering* l, int arg, int count) {
  hlo_type t = tpu_lower_arg_type(l, arg);
  return (cell){tpu_lower_builder(l), tpu_dtype_compute(t.dtype), t.rank == 2 ? t.dims[1] / count : 0};
}

/* Gates argument `at` plus its bias argument `bias_at` where one is given. */
static hlo_value gates_with_bias(tpu_lowering* l, const cell* c, int at, int bias_at) {
  hlo_value gates = tpu_lower_value(l, at, c->t);
  if (tpu_lower_is_none(l, bias_at)) return gates;
  hlo_type type = *hlo_type_of(c->b, gates); /* a copy: adding values may move the builder's types */
  return add(c, gates, tpu_lower_value_as(l, bias_at, &type));
}

/* Sum over the batch: a bias's gradient. */
static hlo_value batch_sum(const cell* c, hlo_value x) {
  int64_t dim = 0;
  return hlo_reduce(c->b, x, hlo_constant(c->b, c->t, 0), "add", &dim, 1);
}

/* _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?,
 * hidden_bias?) -> (hy, cy, workspace). */
static tpu_status lower_lstm_cell(tpu_lowering* l) {
  cell c = cell_of(l, 0, 4);
  hlo_value gates = add(&c, gates_with_bias(l, &c, 0, 3), gates_with_bias(l, &c, 1, 4));
  hlo_value act[4];
  for (int k = 0; k < 4; k++) act[k] = hlo_unary(c.b, k == 2 ? "tanh" : "logistic", block(&c, gates, k));
  hlo_value cy = add(&c, mul(&c, act[1], tpu_lower_value(l, 2, c.t)), mul(&c, act[0], act[2]));
  tpu_lower_set_output(l, 0, mul(&c, act[3], hlo_unary(c.b, "tanh", cy)));
  tpu_lower_set_output(l, 1, cy);
  tpu_lower_set_output(l, 2, blocks(&c, act, 4));
  return NULL;
}

/* _thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy, workspace,
 * has_bias) -> (grad_gates, grad_cx, grad_bias): one gradient serves both
 * gate inputs. No outputs when neither gradient is given; no grad_bias
 * without biases. */
static tpu_status lower_lstm_cell_backward(tpu_lowering* l) {
  if (tpu_lower_output_count(l) == 0) return NULL;
  cell c = cell_of(l, 4, 4);
  hlo_value workspace = tpu_lower_value(l, 4, c.t);
  hlo_value i = block(&c, workspace, 0), f = block(&c, workspace, 1), g = block(&c, workspace, 2),
            o = block(&c, workspace, 3);
  hlo_value tanh_cy = hlo_unary(c.b, "tanh", tpu_lower_value(l, 3, c.t));
  hlo_value grad_cy = tpu_lower_is_none(l, 1) ? HLO_INVALID : tpu_lower_value(l, 1, c.t);
  hlo_value grad_o = hlo_constant_like(c.b, o, 0);
  if (!tpu_lower_is_none(l, 0)) {
    hlo_value grad_hy = tpu_lower_value(l, 0, c.t);
    hlo_value through_hy = mul(&c, mul(&c, grad_hy, o), tanh_slope(&c, tanh_cy));
    grad_cy = grad_cy == HLO_INVALID ? through_hy : add(&c, grad_cy, through_hy);
    grad_o = mul(&c, mul(&c, grad_hy, tanh_cy), sigmoid_slope(&c, o));
  }
  hlo_value grads[4] = {
      mul(&c, mul(&c, grad_cy, g), sigmoid_slope(&c, i)),
      mul(&c, mul(&c, grad_cy, tpu_lower_value(l, 2, c.t)), sigmoid_slope(&c, f)),
      mul(&c, mul(&c, grad_cy, i), tanh_slope(&c, g)),
      grad_o,
  };
  hlo_value grad_gates = blocks(&c, grads, 4);
  tpu_lower_set_output(l, 0, grad_gates);
  tpu_lower_set_output(l, 1, mul(&c, grad_cy, f));
  if (tpu_lower_output_count(l) > 2) tpu_lower_set_output(l, 2, batch_sum(&c, grad_gates));
  return NULL;
}

/* _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?,
 * hidden_bias?) -> (hy, workspace). */
static tpu_status lower_gru_cell(tpu_lowering* l) {
  cell c = cell_of(l, 0, 3);
  hlo_value in = gates_with_bias(l, &c, 0, 3), hidden = gates_with_bias(l, &c, 1, 4);
  hlo_value r = hlo_unary(c.b, "logistic", add(&c, block(&c, in, 0), block(&c, hidden, 0)));
  hlo_value z = hlo_unary(c.b, "logistic", add(&c, block(&c, in, 1), block(&c, hidden, 1)));
  hlo_value hn = block(&c, hidden, 2);
  hlo_value n = hlo_unary(c.b, "tanh", add(&c, block(&c, in, 2), mul(&c, r, hn)));
  hlo_value hx = tpu_lower_value(l, 2, c.t);
  tpu_lower_set_output(l, 0, add(&c, n, mul(&c, z, sub(&c, hx, n))));
  hlo_value kept[5] = {r, z, n, hn, hx};
  tpu_lower_set_output(l, 1, blocks(&c, kept, 5));
  return NULL;
}

/* _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias) ->
 * (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias,
 * grad_hidden_bias); no bias gradients without biases. */
static tpu_status lower_gru_cell_backward(tpu_lowering* l) {
  cell c = cell_of(l, 1, 5);
  hlo_value workspace = tpu_lower_value(l, 1, c.t), grad_hy = tpu_lower_value(l, 0, c.t);
  hlo_value r = block(&c, workspace, 0), z = block(&c, workspace, 1), n = block(&c, workspace, 2),
            hn = block(&c, workspace, 3), hx = block(&c, workspace, 4);
  hlo_value grad_n = mul(&c, mul(&c, grad_hy, one_minus(&c, z)), tanh_slope(&c, n));
  hlo_value grad_r = mul(&c, mul(&c, grad_n, hn), sigmoid_slope(&c, r));
  hlo_value grad_z = mul(&c, mul(&c, grad_hy, sub(&c, hx, n)), sigmoid_slope(&c, z));
  hlo_value in[3] = {grad_r, grad_z, grad_n}, hidden[3] = {grad_r, grad_z, mul(&c, grad_n, r)};
  hlo_value grad_in = blocks(&c, in, 3), grad_hidden = blocks(&c, hidden, 3);
  tpu_lower_set_output(l, 0, grad_in);
  tpu_lower_set_output(l, 1, grad_hidden);
  tpu_lower_set_output(l, 2, mul(&c, grad_hy, z));
  if (tpu_lower_output_count(l) > 3) {
    tpu_lower_set_output(l, 3, batch_sum(&c, grad_in));
    tpu_lower_set_output(l, 4, batch_sum(&c, grad_hidden));
  }
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_thnn_fused_gru_cell", lower_gru_cell, 0},
    {"_thnn_fused_gru_cell_backward", lower_gru_cell_backward, 0},
    {"_thnn_fused_lstm_cell", lower_lstm_cell, 0},
    {"_thnn_fused_lstm_cell_backward_impl", lower_lstm_cell_backward, 0},
};

TPU_OP_FAMILY(tpu_ops_rnn_cell, entries);
