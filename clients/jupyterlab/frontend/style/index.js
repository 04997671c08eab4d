import './base.css';
import './checkpoints.css';
import './agentCellMarks.css';
