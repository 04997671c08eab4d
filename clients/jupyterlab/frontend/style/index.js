import './base.css';
import './checkpoints.css';
