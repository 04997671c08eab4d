import './base.css';
import './agentCellMarks.css';
