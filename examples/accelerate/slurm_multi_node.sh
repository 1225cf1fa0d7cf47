#!/bin/bash
# Two nodes x 4 GPUs of data-parallel CoMLRL training under SLURM (one launcher per node).
#SBATCH --job-name=comlrl-ddp
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=32
#SBATCH --time=24:00:00
set -euo pipefail

GPUS_PER_NODE=4
MAIN_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
MAIN_PORT=29500
# The run directory must be on a file system every node sees (checkpoints are written by rank 0
# and read by every rank on resume).
RUN_CONFIG=${RUN_CONFIG:-examples/length_ratio.yaml}

srun bash -c "accelerate launch \
  --config_file examples/accelerate/multi_node_ddp.yaml \
  --num_machines $SLURM_NNODES \
  --num_processes $((SLURM_NNODES * GPUS_PER_NODE)) \
  --machine_rank \$SLURM_NODEID \
  --main_process_ip $MAIN_ADDR \
  --main_process_port $MAIN_PORT \
  -m comlrl.core.cli train --config $RUN_CONFIG --set output.run_name=ddp-\$SLURM_JOB_ID"

# The same with torchrun instead of accelerate:
# srun torchrun --nnodes $SLURM_NNODES --nproc_per_node $GPUS_PER_NODE \
#   --rdzv_backend c10d --rdzv_endpoint $MAIN_ADDR:$MAIN_PORT --rdzv_id $SLURM_JOB_ID \
#   -m comlrl.core.cli train --config $RUN_CONFIG --set output.run_name=ddp-$SLURM_JOB_ID
