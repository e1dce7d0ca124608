"""Every op's registered schema, pinned (docs/: names, order, what is written).
Regenerate deliberately with EXPECTTEST_ACCEPT=1 after a contract change."""

import pytest
import torch

from samples import OPS, op_overload

expecttest = pytest.importorskip("expecttest")


class TestSchemas(expecttest.TestCase):
    def schemas(self):
        return "\n".join(str(op_overload(op)._schema) for op in OPS)

    def test_every_op_is_registered(self):
        self.assertEqual(sorted(name for name in dir(torch.ops.spec_ops)
                                if not name.startswith("_") and name not in ("name",)), OPS)

    def test_schemas(self):
        self.assertExpectedInline(self.schemas(), """\
spec_ops::compute_new_slot_mapping(Tensor block_table, Tensor query_start_loc, Tensor new_positions, Tensor is_rejected_token_mask, int block_size, int num_new_tokens, int max_model_len) -> Tensor
spec_ops::copy_and_expand_dflash_inputs(Tensor next_token_ids, Tensor target_positions, Tensor(a!) out_input_ids, Tensor(b!) out_context_positions, Tensor(c!) out_query_positions, Tensor(d!) out_context_slot_mapping, Tensor(e!) out_query_slot_mapping, Tensor(f!) out_token_indices, Tensor block_table, Tensor query_start_loc, Tensor? num_rejected_tokens, int parallel_drafting_token_id, int block_size, int num_query_per_req, int num_speculative_tokens) -> ()
spec_ops::copy_and_expand_eagle_inputs(Tensor target_token_ids, Tensor target_positions, Tensor next_token_ids, Tensor(a!) out_input_ids, Tensor(b!) out_positions, Tensor(c!) out_is_rejected_token_mask, Tensor(d!) out_is_masked_token_mask, Tensor(e!) out_new_token_indices, Tensor(f!) out_hidden_state_mapping, Tensor query_start_loc, Tensor query_end_loc, int padding_token_id, int parallel_drafting_token_id, int num_padding_slots_per_request, bool shift_input_ids) -> ()
spec_ops::eagle_mrope_step_update_slot_mapping_and_metadata(Tensor positions, Tensor block_table, Tensor(a!) seq_lens, int block_size, int max_model_len, Tensor(b!) out_positions, Tensor(c!) out_slot_mapping, SymInt? input_batch_size=None) -> ()
spec_ops::eagle_multi_step_slot_mapping(Tensor positions, Tensor block_table, Tensor seq_lens, int block_size, int max_model_len, int num_steps, Tensor(a!) out_positions, Tensor(b!) out_slot_mapping, Tensor(c!) out_seq_lens, SymInt? input_batch_size=None) -> ()
spec_ops::eagle_prepare_inputs_padded(Tensor cu_num_draft_tokens, Tensor valid_sampled_tokens_count, Tensor query_start_loc, Tensor(a!) token_indices_to_sample, Tensor(b!) num_rejected_tokens) -> ()
spec_ops::eagle_prepare_next_token_padded(Tensor sampled_token_ids, Tensor discard_request_mask, Tensor backup_next_token_ids, Tensor(a!) next_token_ids, Tensor(b!) valid_sampled_tokens_count, int vocab_size) -> ()
spec_ops::eagle_step_update_slot_mapping_and_metadata(Tensor positions, Tensor block_table, Tensor(a!) seq_lens, int block_size, int max_model_len, Tensor(b!) out_clamped_positions, Tensor(c!) out_slot_mapping, SymInt? input_batch_size=None) -> ()
spec_ops::prepare_dflash_round(Tensor sampled_token_ids, Tensor discard_request_mask, Tensor backup_next_token_ids, Tensor cu_num_draft_tokens, Tensor query_start_loc, Tensor target_positions, Tensor block_table, Tensor seq_lens, Tensor(a!) next_token_ids, Tensor(b!) valid_sampled_tokens_count, Tensor(c!) out_input_ids, Tensor(d!) out_context_positions, Tensor(e!) out_query_positions, Tensor(f!) out_context_slot_mapping, Tensor(g!) out_query_slot_mapping, Tensor(h!) out_token_indices, Tensor(i!) out_query_start_loc, Tensor(j!) out_seq_lens, int vocab_size, int parallel_drafting_token_id, int block_size, int num_speculative_tokens, SymInt? num_input_tokens=None) -> ()
spec_ops::prepare_eagle_round(Tensor sampled_token_ids, Tensor discard_request_mask, Tensor backup_next_token_ids, Tensor cu_num_draft_tokens, Tensor query_start_loc, Tensor target_token_ids, Tensor target_positions, Tensor target_slot_mapping, Tensor block_table, Tensor seq_lens, Tensor(a!) next_token_ids, Tensor(b!) valid_sampled_tokens_count, Tensor(c!) token_indices_to_sample, Tensor(d!) out_input_ids, Tensor(e!) out_positions, Tensor(f!) out_slot_mapping, Tensor(g!) out_step_positions, Tensor(h!) out_step_slot_mapping, Tensor(i!) out_step_seq_lens, int vocab_size, int block_size, int max_model_len, int num_steps, SymInt? num_input_tokens=None, SymInt? input_batch_size=None) -> ()
spec_ops::prepare_padded_draft_inputs(Tensor sampled_token_ids, Tensor discard_request_mask, Tensor backup_next_token_ids, Tensor cu_num_draft_tokens, Tensor query_start_loc, Tensor(a!) next_token_ids, Tensor(b!) valid_sampled_tokens_count, Tensor(c!) token_indices_to_sample, Tensor(d!) num_rejected_tokens, int vocab_size) -> ()
spec_ops::prepare_parallel_round(Tensor sampled_token_ids, Tensor discard_request_mask, Tensor backup_next_token_ids, Tensor cu_num_draft_tokens, Tensor query_start_loc, Tensor target_token_ids, Tensor target_positions, Tensor block_table, Tensor seq_lens, Tensor(a!) next_token_ids, Tensor(b!) valid_sampled_tokens_count, Tensor(c!) out_input_ids, Tensor(d!) out_positions, Tensor(e!) out_is_masked_token_mask, Tensor(f!) out_new_token_indices, Tensor(g!) out_hidden_state_mapping, Tensor(h!) out_slot_mapping, Tensor(i!) out_query_start_loc, Tensor(j!) out_seq_lens, Tensor(k!) out_step_positions, Tensor(l!) out_step_slot_mapping, Tensor(m!) out_step_seq_lens, int vocab_size, int padding_token_id, int parallel_drafting_token_id, int num_padding_slots_per_request, bool shift_input_ids, int block_size, int max_model_len, int num_steps, SymInt? num_input_tokens=None, SymInt? input_batch_size=None) -> ()
spec_ops::update_num_computed_tokens_for_batch_change(Tensor(a!) num_computed_tokens, Tensor(b!) num_accepted_tokens, Tensor prev_positions, Tensor valid_sampled_token_count, Tensor prev_num_draft_tokens, Tensor cpu_num_computed_tokens) -> ()""")
